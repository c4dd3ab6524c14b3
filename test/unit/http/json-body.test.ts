import sjson from 'secure-json-parse'
import fc from 'fast-check'
import { isDeepStrictEqual } from 'node:util'
import t from 'tap'
import { AppError } from '../../../src/errors/index.js'
import { parseStrictJson } from '../../../src/http/middleware/json-body.js'
import { inexactIntegerAt } from '../../../src/shapes/json-depth.js'
import { firstDepthExceeds, firstFindUnsafeText } from '../shapes/first-walks.js'
import { hostile, writeJson } from '../shapes/hostile-json.js'

type Outcome = { value: unknown } | { code: string; status: number; detail: string | undefined; errors: unknown }

function outcome(text: string | Buffer): Outcome {
  try {
    return { value: parseStrictJson(Buffer.isBuffer(text) ? text : Buffer.from(text)) }
  } catch (err) {
    if (!(err instanceof AppError)) throw err
    return { code: err.code, status: err.status, detail: err.detail, errors: err.errors }
  }
}

/** What the body checks answered before the walks were made cheap (for text JSON.parse accepts). */
function firstOutcome(text: string): Outcome {
  const value: unknown = sjson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' })
  if (firstDepthExceeds(value, 64)) return { code: 'bad_request', status: 400, detail: 'JSON nesting deeper than 64 levels.', errors: undefined }
  const inexact = inexactIntegerAt(text)
  if (inexact !== undefined) return outcome(text) // its message is not the walks' business
  const unsafe = firstFindUnsafeText(value)
  if (unsafe === undefined) return { value }
  const [field, [message]] = Object.entries(unsafe)[0]!
  return { code: 'validation', status: 400, detail: `${field}: ${message}`, errors: unsafe }
}

const NUL = 'must not contain NUL characters'
const NON_FINITE = 'must be a number within the range of a double (about ±1.8e308)'
const DEEP = { code: 'bad_request', status: 400, detail: 'JSON nesting deeper than 64 levels.', errors: undefined }
const nested = (levels: number, inner = '') => '['.repeat(levels) + inner + ']'.repeat(levels)

t.test('refusals keep their status, problem type and field names', async (t) => {
  const invalid = (reason: string) => ({ code: 'bad_request', status: 400, detail: `The body is not valid JSON (${reason}).`, errors: undefined })
  const field = (name: string, message: string) => ({ code: 'validation', status: 400, detail: `${name}: ${message}`, errors: { [name]: [message] } })
  t.same(outcome(Buffer.from([0x5b, 0xff, 0x5d])), { code: 'bad_request', status: 400, detail: 'The body is not valid UTF-8.', errors: undefined })
  t.same(outcome('[] x'), invalid('syntax error at position 3'))
  t.same(outcome('[1,'), invalid('syntax error'))
  t.same(outcome('{"__proto__":{"x":1}}'), invalid('forbidden key __proto__ or constructor.prototype'))
  t.same(outcome(nested(65)), DEEP)
  t.same(outcome(`{"a":${nested(64)}}`), DEEP, 'objects count')
  t.same(outcome(nested(64)), { value: JSON.parse(nested(64)) }, '64 levels are allowed')
  t.same(outcome(`{"a":${nested(70)},"a":0}`), { value: { a: 0 } }, 'a repeated key keeps only the last, shallow value')
  t.same(outcome(nested(65, '"\\u0000"')), DEEP, 'the depth is refused first')
  t.same(outcome('{"a":12345678901234567891,"b":"\\u0000"}'), field('body', 'the integer at position 5 has more digits than a number holds exactly; send it as a string'))
  t.same(outcome('{"a":[1,{"b":"x\\u0000"}]}'), field('a[1].b', NUL))
  t.same(outcome('[[0],[0,["\\ud800"]]]'), field('[1][1][0]', 'must not contain unpaired UTF-16 surrogates'))
  t.same(outcome('{"m":{"k\\u0000":1}}'), field('m', 'has a key that contains NUL characters'))
  t.same(outcome('{"n":1e400}'), field('n', NON_FINITE))
  t.same(outcome(`{"n":[${'9'.repeat(400)}]}`), field('n[0]', NON_FINITE), 'a 400-digit integer (was a 500: BigInt(Infinity) threw)')
  t.same(outcome('"\\u0000"'), field('body', NUL))
  t.same(outcome('{"a":"😀\\ud83d\\ude00","b":"\\\\u0000","c":1e308}'), { value: { a: '😀😀', b: '\\u0000', c: 1e308 } })
})

t.test('any body is answered as the first checks answered it', async (t) => {
  fc.assert(
    fc.property(hostile, fc.integer({ min: 0, max: 66 }), (value, levels) => {
      const text = nested(levels, writeJson(value))
      return isDeepStrictEqual(outcome(text), firstOutcome(text))
    }),
    { numRuns: 2000 },
  )
  t.pass('held')
})

t.test('wide 5 MB bodies are accepted, and a problem at their end is still found', async (t) => {
  const FIVE_MB = 5 * 1024 * 1024
  const fill = (item: (i: number) => string) => {
    const items: string[] = []
    for (let length = 1, i = 0; length < FIVE_MB; i++) length += items[items.push(item(i)) - 1]!.length + 1
    return items
  }
  const bodies: Record<string, string> = {
    zeros: `[${fill(() => '0').join(',')}]`,
    strings: `[${fill(() => '"a"').join(',')}]`,
    keys: `{${fill((i) => `"k${i}":${i % 2 ? '"v"' : '0'}`).join(',')}}`,
    deep: `[${fill(() => nested(63, '0')).join(',')}]`,
  }
  for (const [name, body] of Object.entries(bodies)) {
    t.ok(body.length >= FIVE_MB, `${name}: ${body.length} bytes`)
    const got = outcome(body)
    t.ok('value' in got && isDeepStrictEqual(got.value, JSON.parse(body)), `${name}: accepted as parsed`)
  }
  const zeros = JSON.parse(bodies.zeros!) as unknown[]
  t.same(outcome(`${bodies.zeros!.slice(0, -1)},"\\u0000"]`), {
    code: 'validation',
    status: 400,
    detail: `[${zeros.length}]: ${NUL}`,
    errors: { [`[${zeros.length}]`]: [NUL] },
  })
  t.same(outcome(`${bodies.keys!.slice(0, -1)},"x":1e400}`), { code: 'validation', status: 400, detail: `x: ${NON_FINITE}`, errors: { x: [NON_FINITE] } })
})

t.test('a forbidden key is named as such, not as a syntax error', async (t) => {
  for (const text of ['{"__proto__":{"type":"card"}}', '{"a":{"constructor":{"prototype":{}}}}']) {
    t.match(outcome(text), { code: 'bad_request', detail: 'The body is not valid JSON (forbidden key __proto__ or constructor.prototype).' }, text)
  }
  t.match(outcome('{"a":'), { detail: /syntax error/ }, 'and a syntax error still as one')
})
