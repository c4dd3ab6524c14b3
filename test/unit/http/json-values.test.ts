import t from 'tap'
import { jsonValuesExceed } from '../../../src/http/json-values.js'

const values = (text: string): number => {
  // The smallest bound the text does not exceed is its count of values.
  let max = 1
  while (jsonValuesExceed(Buffer.from(text), max)) max++
  return max
}

t.test('counts the values a parse would make, not the bytes', async (t) => {
  t.equal(values('1'), 1)
  t.equal(values('[]'), 1)
  t.equal(values('[ \n ]'), 1, 'an empty container with whitespace is still empty')
  t.equal(values('{}'), 1)
  t.equal(values('[{},{},{}]'), 4)
  t.equal(values('{"a":1,"b":[true,null,"x"]}'), 6)
  t.equal(values('{"type":"token","data":[{},{}]}'), 5)
  t.equal(values('[[[[1]]]]'), 5)
})

t.test('commas and brackets inside strings are text, escapes included', async (t) => {
  t.equal(values('"a,b,[c],{d}"'), 1)
  t.equal(values('["\\",[,{", "\\\\", 2]'), 4)
  t.equal(values('{"k,[{":"v,]}"}'), 2)
  t.equal(values('["é,ü", "日本,語"]'), 3, 'multi-byte characters hide no quote or comma')
})

t.test('stops at the bound and says whether the body passes it', async (t) => {
  const wide = (n: number) => `[${Array.from({ length: n }, () => '{}').join(',')}]`
  t.notOk(jsonValuesExceed(Buffer.from(wide(99)), 100), '99 objects and their array: 100 values')
  t.ok(jsonValuesExceed(Buffer.from(wide(100)), 100), '101 values')
})
