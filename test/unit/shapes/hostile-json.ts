// Generators of JSON values and texts with what the strict body checks refuse mixed in: NUL and
// lone surrogates in strings and keys, numbers beyond a double (as text: JSON.stringify cannot
// write them), keys that sort before others (`0`, `10`) or spell paths (`a.b`, `[0]`, ``).
import fc from 'fast-check'

export const UNSAFE_STRINGS = ['\u0000', 'a\u0000b', '\ud800', 'x\udfff', '\udc00\ud800', '\ud83d']
const SAFE_STRINGS = ['', 'a', '😀', '\ud83d\ude00x', '[[{', '"\\', '\\u0000', 'e400']
const KEYS = ['', '0', '1', '10', 'a', 'b', 'a.b', '[0]', 'x\u0000', '\ud800', 'constructorx']
/** Literals JSON.parse reads as ±Infinity, and finite ones near the edge. */
export const NUMBER_TEXTS = ['1e400', '-1e400', '9'.repeat(400), '2' + '0'.repeat(209) + 'e99', '1.7976931348623159e308', '1e308', '1' + '0'.repeat(209) + 'e99', '9'.repeat(209), '1e-400', '-0', '0.5e+1', '12', '1E100']

/** A JSON value (numbers as text) to be written by `writeJson`. */
export type Hostile = null | boolean | string | { number: string } | Hostile[] | { entries: [string, Hostile][] }

export const hostile: fc.Arbitrary<Hostile> = fc.letrec<{ value: Hostile }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    fc.oneof(fc.constantFrom(...UNSAFE_STRINGS, ...SAFE_STRINGS), fc.string({ maxLength: 4, unit: 'binary' })),
    fc.oneof(fc.constantFrom(...NUMBER_TEXTS), fc.double({ noNaN: true, noDefaultInfinity: true }).map(String), fc.integer().map(String)).map((number) => ({ number })),
    fc.constantFrom(null, true, false),
    fc.array(tie('value'), { maxLength: 5 }),
    fc.array(fc.tuple(fc.oneof(fc.constantFrom(...KEYS), fc.string({ maxLength: 3 })), tie('value')), { maxLength: 5 }).map((entries) => ({ entries })),
  ),
})).value

/** The JSON text of a generated value; repeated keys are written as they came (the last one wins). */
export function writeJson(value: Hostile): string {
  if (Array.isArray(value)) return `[${value.map(writeJson).join(',')}]`
  if (value !== null && typeof value === 'object') {
    if ('number' in value) return value.number
    return `{${value.entries.map(([key, item]) => `${JSON.stringify(key)}:${writeJson(item)}`).join(',')}}`
  }
  return JSON.stringify(value)
}
