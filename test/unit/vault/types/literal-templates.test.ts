import t from 'tap'
import { fingerprintInput, getTokenType, searchIndexValues, validateDataTemplate } from '../../../../src/vault/types/index.js'

// Fingerprint expressions and search indexes are equality tests of the token's data: literal
// text that the data does not render would make a token equal to a value it does not hold.

t.test('an expression must refer to the data where it is asked to (parse tree, not text)', async (t) => {
  const must = { mustReferToData: true }
  t.match(validateDataTemplate('4242424242424242', 'fingerprint_expression', must), { fingerprint_expression: [/must refer to the token data/] })
  t.match(validateDataTemplate('data.number', 'search_indexes[0]', must), { 'search_indexes[0]': [/must refer to the token data/] }, 'a name without {{ }} is text')
  t.match(validateDataTemplate('{ data }', 'x', must), { x: [/must refer/] })
  t.same(validateDataTemplate('021000021:{{ data.account_number }}', 'x', must), {}, 'literal text around a reference is allowed')
  t.same(validateDataTemplate('{{ data | last4 }}', 'x', must), {})
  t.same(validateDataTemplate('4242424242424242', 'mask'), {}, 'a mask of literal text is fine: it tests nothing')
  t.match(validateDataTemplate('{{ other }}', 'x', must), { x: [/unknown reference/] }, 'reference errors come first')
})

t.test('values of literal text alone are neither fingerprinted nor indexed', async (t) => {
  const cardNumber = getTokenType('card_number')
  const other = '4000056655665556'
  t.equal(fingerprintInput(cardNumber, other, '4242424242424242{{ data | slice: 0, 0 }}'), null, 'the reference renders nothing')
  t.equal(fingerprintInput(getTokenType('token'), { a: 1 }, 'x{{ data.missing }}'), null)
  t.equal(fingerprintInput(cardNumber, other, '4242{{ data | last4 }}'), '"42425556"', 'a reference that renders something counts')
  t.same(searchIndexValues(other, ['4242424242424242{{ data.missing }}', '{{ data | last4 }}']), ['5556'])
  t.same(searchIndexValues({ a: '' }, ['x-{{ data.a }}-{{ data.b }}']), [])
  t.same(searchIndexValues({ a: '1' }, ['x-{{ data.a }}-{{ data.b }}']), ['x-1-'])
})
