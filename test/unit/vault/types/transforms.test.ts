import t from 'tap'
import { ExpressionError } from '../../../../src/expressions/index.js'
import {
  applyTransform,
  canonicalJson,
  dataLookup,
  fingerprintInput,
  getTokenType,
  renderDataTemplate,
  searchIndexValues,
  TOKEN_TYPE_NAMES,
  validateDataTemplate,
} from '../../../../src/vault/types/index.js'

const card = { number: '4242424242424242', expiration_month: 12, expiration_year: 2030, cvc: '123' }
const cardType = getTokenType('card')

t.test('redact omits, reveal returns plaintext', async (t) => {
  t.equal(applyTransform('redact', { data: card, mask: cardType.defaultMask }), undefined)
  t.equal(applyTransform('reveal', { data: card, mask: cardType.defaultMask }), card)
})

t.test('mask renders the mask against the data, or omits without one', async (t) => {
  t.same(applyTransform('mask', { data: card, mask: cardType.defaultMask }), {
    number: 'XXXXXXXXXXXX4242',
    expiration_month: 12,
    expiration_year: 2030,
  })
  t.equal(applyTransform('mask', { data: card }), undefined)
  t.equal(applyTransform('mask', { data: card, mask: null }), undefined)
  t.equal(applyTransform('mask', { data: 'secret' }), undefined)
})

t.test('a custom mask can be any JSON with data references', async (t) => {
  const mask = { last4: '{{ data.number | last4 }}', bin: '{{ data | json: "$.number" | slice: 0, 6 }}', brand: 'visa', n: 1 }
  t.same(applyTransform('mask', { data: card, mask }), { last4: '4242', bin: '424242', brand: 'visa', n: 1 })
  t.equal(applyTransform('mask', { data: { a: { b: ['x', 'yz'] } }, mask: 'v={{ data.a.b.1 }}' }), 'v=yz')
  t.equal(applyTransform('mask', { data: { a: 1 }, mask: '{{ data.missing }}' }), null)
})

t.test('a mask that no longer fits the data fails closed', async (t) => {
  t.equal(applyTransform('mask', { data: { number: { nested: true } }, mask: cardType.defaultMask }), undefined)
})

t.test('default masks of every type', async (t) => {
  const samples: Record<string, unknown> = {
    token: { anything: 1 },
    card,
    card_number: '4242424242424242',
    bank: { routing_number: '021000021', account_number: '12345678' },
    us_bank_routing_number: '021000021',
    social_security_number: '123-45-6789',
    employer_id_number: '12-3456789',
  }
  const masked = Object.fromEntries(
    TOKEN_TYPE_NAMES.map((name) => {
      const type = getTokenType(name)
      return [name, applyTransform('mask', { data: samples[name], mask: type.defaultMask })]
    }),
  )
  t.same(masked, {
    token: undefined,
    card: { number: 'XXXXXXXXXXXX4242', expiration_month: 12, expiration_year: 2030 },
    card_number: 'XXXXXXXXXXXX4242',
    bank: { routing_number: '021000021', account_number: 'XXXX5678' },
    us_bank_routing_number: '021000021',
    social_security_number: 'XXXXXXX6789',
    employer_id_number: 'XXXXXX6789',
  })
  for (const name of TOKEN_TYPE_NAMES) t.same(validateDataTemplate(getTokenType(name).defaultMask, 'mask'), {}, name)
})

t.test('data templates may only refer to the token’s own data', async (t) => {
  t.same(validateDataTemplate('{{ data }} and {{ data.a.b | last4 }}', 'mask'), {})
  t.same(validateDataTemplate({ a: ['x {{ other_token }}'] }, 'mask'), {
    mask: ['Invalid expression at /a/0 position 5: unknown reference "other_token"; only data and data.<field> may be used here'],
  })
  t.match(validateDataTemplate('{{ data..a }}', 'fingerprint_expression'), { fingerprint_expression: [/unknown reference "data\.\.a"/] })
  t.match(validateDataTemplate('{{ data.a. }}', 'mask'), { mask: [/unknown reference/] })
  t.match(validateDataTemplate('{{ datum }}', 'mask'), { mask: [/unknown reference/] })
  t.match(validateDataTemplate({ n: '{{ data | nope }}' }, 'mask'), { mask: [/\/n position 10: unknown filter "nope"/] })
  t.match(validateDataTemplate('{{ data', 'mask'), { mask: [/unclosed/] })
  t.throws(() => renderDataTemplate('{{ tok_other }}', card), ExpressionError)
  t.throws(() => dataLookup(card)('other'), ExpressionError)
  t.equal(dataLookup(card)('data.toString'), null, 'inherited properties are invisible')
})

t.test('fingerprint input: canonical, default per type, custom expressions', async (t) => {
  t.equal(fingerprintInput(cardType, card), '"4242424242424242"')
  t.equal(fingerprintInput(cardType, { ...card, cvc: '999', expiration_year: 2031 }), '"4242424242424242"', 'card → number only')
  const ssn = getTokenType('social_security_number')
  t.equal(fingerprintInput(ssn, '123-45-6789'), fingerprintInput(ssn, '123456789'), 'dashes do not matter')
  const bank = getTokenType('bank')
  t.equal(fingerprintInput(bank, { routing_number: '021000021', account_number: '1' }), '"021000021:1"')
  const token = getTokenType('token')
  t.equal(fingerprintInput(token, { b: 1, a: [2, { d: 1, c: 2 }] }), fingerprintInput(token, { a: [2, { c: 2, d: 1 }], b: 1 }), 'key order never matters')
  t.equal(fingerprintInput(token, { b: 1, a: 2 }), '{"a":2,"b":1}')
  t.not(fingerprintInput(token, '1'), fingerprintInput(token, 1), 'a string is not a number')
  t.equal(fingerprintInput(token, { a: 1 }, '{{ data.missing }}'), null, 'nothing to fingerprint')
  t.equal(fingerprintInput(token, { a: '' }, '{{ data.a }}'), null)
  t.equal(fingerprintInput(cardType, card, '{{ data.number | last4 }}-{{ data.expiration_year }}'), '"4242-2030"')
  t.throws(() => fingerprintInput(token, 'x', '{{ other }}'), ExpressionError)
})

t.test('canonicalJson', async (t) => {
  t.equal(canonicalJson({ z: [3, { y: null, x: 'é' }], a: true }), '{"a":true,"z":[3,{"x":"é","y":null}]}')
  t.equal(canonicalJson('s'), '"s"')
  t.equal(canonicalJson(undefined), 'null')
})

t.test('search index values', async (t) => {
  const exprs = ['{{ data.number | last4 }}', '{{ data.number }}', '{{ data.missing }}', '{{ data.number | slice: -4, 4 }}', '{{ data }}']
  t.same(searchIndexValues(card, exprs), ['4242', '4242424242424242', JSON.stringify(card)])
  t.same(searchIndexValues('123-45-6789', ['{{ data | last4 }}']), ['6789'])
  t.same(searchIndexValues(card, []), [])
  t.throws(() => searchIndexValues(card, ['{{ other }}']), ExpressionError)
})
