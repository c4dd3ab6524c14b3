import t from 'tap'
import { getTokenType, isTokenTypeName, TOKEN_TYPE_NAMES, tokenTypes, type TokenTypeName } from '../../../../src/vault/types/index.js'

const validate = (type: TokenTypeName, data: unknown) => getTokenType(type).validate(data)
const card = { number: '4242424242424242', expiration_month: 12, expiration_year: 2030 }

t.test('the registry', async (t) => {
  t.same(TOKEN_TYPE_NAMES, ['token', 'card', 'card_number', 'bank', 'us_bank_routing_number', 'social_security_number', 'employer_id_number'])
  for (const name of TOKEN_TYPE_NAMES) t.equal(tokenTypes[name].name, name)
  t.ok(isTokenTypeName('card'))
  t.notOk(isTokenTypeName('toString'))
  t.notOk(isTokenTypeName('CARD'))
  t.notOk(isTokenTypeName(1))
})

t.test('default containers', async (t) => {
  t.same(Object.fromEntries(TOKEN_TYPE_NAMES.map((n) => [n, tokenTypes[n].defaultContainer])), {
    token: '/general/high/',
    card: '/pci/high/',
    card_number: '/pci/high/',
    bank: '/bank/high/',
    us_bank_routing_number: '/bank/low/',
    social_security_number: '/pii/high/',
    employer_id_number: '/pii/high/',
  })
})

t.test('token: any JSON but nothing', async (t) => {
  for (const data of ['x', '', 0, false, [], {}, { a: [1, { b: null }] }]) t.same(validate('token', data), {}, JSON.stringify(data))
  t.same(validate('token', null), { data: ['is required'] })
  t.same(validate('token', undefined), { data: ['is required'] })
})

t.test('card: valid', async (t) => {
  t.same(validate('card', card), {})
  t.same(validate('card', { ...card, cvc: '123' }), {})
  t.same(validate('card', { ...card, cvc: '1234', number: '378282246310005' }), {})
  t.same(validate('card', { ...card, number: '4222222222222', expiration_month: 1, expiration_year: 1000 }), {}, '13 digits')
  t.same(validate('card', { ...card, number: '6011000000000000004'.slice(0, 18) + luhnDigit('601100000000000000') }), {}, '19 digits')
})

t.test('card: invalid, every field reported', async (t) => {
  t.same(validate('card', 'x'), { data: ['must be an object with number, expiration_month, expiration_year, cvc'] })
  t.same(validate('card', [card]), { data: ['must be an object with number, expiration_month, expiration_year, cvc'] })
  t.same(validate('card', {}), {
    'data.number': ['is required'],
    'data.expiration_month': ['is required'],
    'data.expiration_year': ['is required'],
  })
  t.same(validate('card', { number: 4242424242424242, expiration_month: 13, expiration_year: 30, cvc: 123, extra: 1 }), {
    'data.extra': ['is not allowed'],
    'data.number': ['must be a string'],
    'data.expiration_month': ['must be an integer from 1 to 12'],
    'data.expiration_year': ['must be a 4-digit year'],
    'data.cvc': ['must be a string of 3 or 4 digits'],
  })
  t.same(validate('card', { ...card, number: '4242424242424241' }), { 'data.number': ['must pass the Luhn check'] })
  for (const number of ['424242424242', '42424242424242424242', '4242 4242 4242 4242', '4242-4242-4242-4242', '', '４２４２４２４２４２４２４２４２']) {
    t.same(validate('card', { ...card, number }), { 'data.number': ['must be 13 to 19 digits'] }, number)
  }
  t.same(validate('card', { ...card, expiration_month: 0 }), { 'data.expiration_month': ['must be an integer from 1 to 12'] })
  t.same(validate('card', { ...card, expiration_month: 1.5 }), { 'data.expiration_month': ['must be an integer from 1 to 12'] })
  t.same(validate('card', { ...card, expiration_month: '12' }), { 'data.expiration_month': ['must be an integer from 1 to 12'] })
  t.same(validate('card', { ...card, expiration_year: 10000 }), { 'data.expiration_year': ['must be a 4-digit year'] })
  t.same(validate('card', { ...card, cvc: '12' }), { 'data.cvc': ['must be a string of 3 or 4 digits'] })
  t.same(validate('card', { ...card, cvc: '12345' }), { 'data.cvc': ['must be a string of 3 or 4 digits'] })
  t.same(validate('card', { ...card, cvc: 'abc' }), { 'data.cvc': ['must be a string of 3 or 4 digits'] })
})

t.test('card_number', async (t) => {
  t.same(validate('card_number', '4242424242424242'), {})
  t.same(validate('card_number', '4242424242424241'), { data: ['must pass the Luhn check'] })
  t.same(validate('card_number', '4242'), { data: ['must be 13 to 19 digits'] })
  t.same(validate('card_number', 4242424242424242), { data: ['must be a string'] })
  t.same(validate('card_number', null), { data: ['is required'] })
  t.same(validate('card_number', card), { data: ['must be a string'] })
})

t.test('bank', async (t) => {
  t.same(validate('bank', { routing_number: '021000021', account_number: '12345678901234567' }), {})
  t.same(validate('bank', { routing_number: '011000015', account_number: '1' }), {})
  t.same(validate('bank', { routing_number: '123456789', account_number: '123456789012345678' }), {
    'data.routing_number': ['must pass the ABA routing number checksum'],
    'data.account_number': ['must be 1 to 17 digits'],
  })
  t.same(validate('bank', { routing_number: '02100002', account_number: '12-34' }), {
    'data.routing_number': ['must be 9 digits'],
    'data.account_number': ['must be 1 to 17 digits'],
  })
  t.same(validate('bank', { routing_number: 21000021, account_number: '' }), {
    'data.routing_number': ['must be a string'],
    'data.account_number': ['must be 1 to 17 digits'],
  })
  t.same(validate('bank', { iban: 'x' }), {
    'data.iban': ['is not allowed'],
    'data.routing_number': ['is required'],
    'data.account_number': ['is required'],
  })
  t.same(validate('bank', '021000021'), { data: ['must be an object with routing_number, account_number'] })
})

t.test('us_bank_routing_number', async (t) => {
  t.same(validate('us_bank_routing_number', '021000021'), {})
  t.same(validate('us_bank_routing_number', '021000022'), { data: ['must pass the ABA routing number checksum'] })
  t.same(validate('us_bank_routing_number', '0210000210'), { data: ['must be 9 digits'] })
  t.same(validate('us_bank_routing_number', 21000021), { data: ['must be a string'] })
})

t.test('social_security_number', async (t) => {
  for (const ok of ['123456789', '123-45-6789', '123-456789', '12345-6789']) t.same(validate('social_security_number', ok), {}, ok)
  const message = { data: ['must be 9 digits, optionally written as 123-45-6789'] }
  for (const bad of ['12345678', '1234567890', '12-345-6789', '123--45-6789', '-123456789', '123456789-', '123 45 6789', 'abc-de-fghi', '']) {
    t.same(validate('social_security_number', bad), message, bad)
  }
  t.same(validate('social_security_number', 123456789), { data: ['must be a string'] })
})

t.test('employer_id_number', async (t) => {
  for (const ok of ['123456789', '12-3456789']) t.same(validate('employer_id_number', ok), {}, ok)
  const message = { data: ['must be 9 digits, optionally written as 12-3456789'] }
  for (const bad of ['123-45-6789', '1-23456789', '12-345678', '12-34567890']) t.same(validate('employer_id_number', bad), message, bad)
  t.same(validate('employer_id_number', undefined), { data: ['is required'] })
})

t.test('canonical forms', async (t) => {
  t.equal(getTokenType('social_security_number').canonicalize('123-45-6789'), '123456789')
  t.equal(getTokenType('employer_id_number').canonicalize('12-3456789'), '123456789')
  t.same(getTokenType('card').canonicalize(card), card)
})

function luhnDigit(body: string): string {
  for (let d = 0; d <= 9; d++) if (getTokenType('card_number').validate(body + d).data === undefined) return String(d)
  throw new Error('unreachable')
}
