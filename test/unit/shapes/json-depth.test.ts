import fc from 'fast-check'
import t from 'tap'
import { depthExceeds, inexactIntegerAt, textDepthExceeds } from '../../../src/shapes/json-depth.js'

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

t.test('integer literals a double does not hold exactly are found; strings, floats and exact ones are not', async (t) => {
  t.equal(inexactIntegerAt('{"a":12345678901234567891}'), 5)
  t.equal(inexactIntegerAt('[1,-9007199254740993]'), 3)
  for (const fine of ['[9007199254740992]', '[1e20]', '[2.5e17]', '[0.12345678901234567891]', '["12345678901234567891"]', '["a\\\\\\"12345678901234567891"]', '[12345678901234567891e0]']) {
    t.equal(inexactIntegerAt(fine), undefined, fine)
  }
  t.equal(inexactIntegerAt('["\\"", 12345678901234567891]'), 7, 'after an escaped quote the scan is outside the string again')
})
