import fc from 'fast-check'
import t from 'tap'
import { depthExceeds, inexactIntegerAt, textDepthExceeds } from '../../../src/shapes/json-depth.js'
import { firstDepthExceeds } from './first-walks.js'
import { hostile, writeJson } from './hostile-json.js'

t.test('the text scan answers as the parsed value does, for any JSON', async (t) => {
  fc.assert(
    fc.property(fc.jsonValue({ maxDepth: 8 }), fc.integer({ min: 0, max: 9 }), (value, max) => {
      const text = JSON.stringify(value)
      return textDepthExceeds(text, max) === depthExceeds(JSON.parse(text), max)
    }),
    { numRuns: 2000 },
  )
  t.pass('held')
})

t.test('brackets inside strings, escaped quotes and backslashes do not count', async (t) => {
  t.equal(textDepthExceeds(JSON.stringify(['[[[[', '\\"[[[', { k: '{{{{' }]), 2), false)
  t.equal(textDepthExceeds(JSON.stringify([[['\\']]]), 2), true)
  const deep = '['.repeat(9000) + ']'.repeat(9000)
  t.equal(textDepthExceeds(deep, 512), true, 'any depth, no recursion')
  t.equal(depthExceeds(JSON.parse(deep), 512), true)
})

t.test('the value walk answers as the first one did, at every limit', async (t) => {
  fc.assert(
    fc.property(hostile, fc.integer({ min: -1, max: 7 }), (value, max) => {
      const parsed: unknown = JSON.parse(writeJson(value))
      return depthExceeds(parsed, max) === firstDepthExceeds(parsed, max)
    }),
    { numRuns: 3000 },
  )
  t.pass('held')
  const at = (levels: number) => JSON.parse('['.repeat(levels) + ']'.repeat(levels)) as unknown
  t.equal(depthExceeds(at(64), 64), false)
  t.equal(depthExceeds(at(65), 64), true)
  t.equal(depthExceeds({ a: [{ b: 0 }] }, 2), true, 'objects count as arrays do')
  t.equal(depthExceeds({ a: [{ b: 0 }] }, 3), false)
  t.equal(depthExceeds('[[[', 0), false, 'a string is no level')
})

t.test('a repeated key: the text is deeper than the value JSON.parse keeps', async (t) => {
  const text = `{"a":${'['.repeat(70)}${']'.repeat(70)},"a":0}`
  t.equal(textDepthExceeds(text, 64), true)
  t.equal(depthExceeds(JSON.parse(text), 64), false)
})

t.test('integer literals a double does not hold exactly are found; strings, floats and exact ones are not', async (t) => {
  t.equal(inexactIntegerAt('{"a":12345678901234567891}'), 5)
  t.equal(inexactIntegerAt('[1,-9007199254740993]'), 3)
  for (const fine of ['[9007199254740992]', '[1e20]', '[2.5e17]', '[0.12345678901234567891]', '["12345678901234567891"]', '["a\\\\\\"12345678901234567891"]', '[12345678901234567891e0]']) {
    t.equal(inexactIntegerAt(fine), undefined, fine)
  }
  t.equal(inexactIntegerAt('["\\"", 12345678901234567891]'), 7, 'after an escaped quote the scan is outside the string again')
  // BigInt(Infinity) threw (a 500): such a literal is the range check's (findUnsafeText's) to refuse
  t.equal(inexactIntegerAt(`[${'9'.repeat(400)}]`), undefined, 'beyond a double: left to the range check')
  t.equal(inexactIntegerAt(`[${'9'.repeat(400)},12345678901234567891]`), 402, 'and the scan goes on past it')
})
