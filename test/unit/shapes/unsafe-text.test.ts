import fc from 'fast-check'
import { isDeepStrictEqual } from 'node:util'
import t from 'tap'
import { findUnsafeText, jsonTextMayBeUnsafe } from '../../../src/shapes/unsafe-text.js'
import { firstFindUnsafeText } from './first-walks.js'
import { hostile, writeJson } from './hostile-json.js'

const NUL = 'must not contain NUL characters'
const LONE = 'must not contain unpaired UTF-16 surrogates'
const NON_FINITE = 'must be a number within the range of a double (about ±1.8e308)'

t.test('the first problem is named by its field path, keys on the object that holds them', async (t) => {
  const cases: [string, Record<string, string[]> | undefined][] = [
    ['"a\\u0000"', { body: [NUL] }],
    ['1e400', { body: [NON_FINITE] }],
    ['{"a\\u0000":1}', { body: ['has a key that contains NUL characters'] }],
    ['{"a":{"\\ud800b":1}}', { a: ['has a key that contains unpaired UTF-16 surrogates'] }],
    ['[[0,["x","\\u0000"]]]', { '[0][1][1]': [NUL] }],
    ['{"a":{"b":["\\udc00"]}}', { 'a.b[0]': [LONE] }],
    ['{"rules":[{"priority":1,"description":"\\u0000"}]}', { 'rules[0].description': [NUL] }],
    ['{"a":[{"k\\u0000":1}]}', { 'a[0]': ['has a key that contains NUL characters'] }],
    ['{"":"\\u0000"}', { body: [NUL] }],
    ['{"a":{"":"\\u0000"}}', { 'a.': [NUL] }],
    ['{"n":-1e400}', { n: [NON_FINITE] }],
    // several problems: the walk goes right to left, an object's keys checked as it is reached
    ['["\\u0000",1e400]', { '[1]': [NON_FINITE] }],
    ['{"a":"\\u0000","b":"\\ud800"}', { b: [LONE] }],
    ['{"a":"\\u0000","b\\ud800":1}', { body: ['has a key that contains unpaired UTF-16 surrogates'] }],
    ['{"b":1,"10":"\\u0000","2":"\\ud800"}', { '10': [NUL] }],
    ['["\\ud83d\\ude00","😀",1e308,"[\\"{"]', undefined],
  ]
  for (const [text, expected] of cases) t.same(findUnsafeText(JSON.parse(text)), expected, text)
})

t.test('any nesting: the walk is iterative', async (t) => {
  const deep = '['.repeat(20000) + '"\\u0000"' + ']'.repeat(20000)
  t.same(findUnsafeText(JSON.parse(deep)), { ['[0]'.repeat(20000)]: [NUL] })
})

t.test('a wide value is walked to its last element', async (t) => {
  const wide: unknown[] = new Array(2_000_000).fill(0)
  t.equal(findUnsafeText(wide), undefined)
  wide[1_999_999] = 'x\u0000'
  t.same(findUnsafeText(wide), { '[1999999]': [NUL] })
  const keys = Object.fromEntries(Array.from({ length: 200_000 }, (_, i) => [`k${i}`, 'v']))
  t.equal(findUnsafeText(keys), undefined)
  keys.k0 = '\ud800'
  t.same(findUnsafeText(keys), { k0: [LONE] })
})

t.test('it answers as the first walk did, for any value (the same problem, the same field)', async (t) => {
  fc.assert(
    fc.property(hostile, (value) => {
      const parsed: unknown = JSON.parse(writeJson(value))
      return isDeepStrictEqual(findUnsafeText(parsed), firstFindUnsafeText(parsed))
    }),
    { numRuns: 3000 },
  )
  t.pass('held')
  // values no JSON text gives (a Reactor result may be built in code): NaN, holes
  t.same(findUnsafeText([NaN]), firstFindUnsafeText([NaN]))
  t.same(findUnsafeText([1, , '\u0000']), firstFindUnsafeText([1, , '\u0000'])) // eslint-disable-line no-sparse-arrays
})

t.test('the text check never clears text whose value has a problem', async (t) => {
  fc.assert(
    fc.property(hostile, (value) => {
      const text = writeJson(value)
      return findUnsafeText(JSON.parse(text)) === undefined || jsonTextMayBeUnsafe(text)
    }),
    { numRuns: 5000 },
  )
  t.pass('held')
  for (const text of ['["\\u0000"]', '["\\uD800"]', '["\\udfff"]', '{"\\uDbFf":1}', '[1e400]', '[1E+308]', '[' + '9'.repeat(309) + ']', '[2' + '0'.repeat(209) + 'e99]']) {
    t.ok(jsonTextMayBeUnsafe(text), text)
  }
  for (const text of ['[0,1,2]', '["a","😀","\\u00e9"]', '{"a":1e99,"b":-2.5E-12}', '[' + '9'.repeat(199) + ']']) {
    t.notOk(jsonTextMayBeUnsafe(text), text)
  }
})
