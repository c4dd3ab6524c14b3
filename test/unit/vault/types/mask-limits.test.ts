import t from 'tap'
import { allowedMask, getTokenType, maskProblems, testsBeyondMask, TOKEN_TYPE_NAMES, type TokenTypeName } from '../../../../src/vault/types/index.js'
import { checkedMaskMemo } from '../../../../src/vault/types/mask-limits.js'

const problems = (type: TokenTypeName, mask: unknown) => maskProblems(mask, getTokenType(type).maskLimits, type)

t.test('every default mask is within its own type limits', async (t) => {
  for (const name of TOKEN_TYPE_NAMES) t.same(problems(name, getTokenType(name).defaultMask ?? null), [], name)
})

t.test('card: at most the first 6 and last 4 of the number, never the CVC', async (t) => {
  const ok: unknown[] = [
    { number: '{{ data.number | reveal_last: 4 }}' },
    { bin: '{{ data.number | slice: 0, 6 }}', last4: '{{ data.number | last4 }}' },
    '{{ data | json: "$.number" | slice: -4 }}',
    { exp: '{{ data.expiration_month }}/{{ data.expiration_year }}', brand: 'visa' },
    '{{ data.number | slice: 2, 4 }}',
  ]
  for (const mask of ok) t.same(problems('card', mask), [], JSON.stringify(mask))
  const refused: [unknown, RegExp][] = [
    [{ number: '{{ data.number }}' }, /at most the first 6 and the last 4 characters of data\.number/],
    [{ cvc: '{{ data.cvc }}' }, /may not show data\.cvc/],
    ['{{ data.cvc | last4 }}', /may not show data\.cvc/],
    ['{{ data }}', /may not show data$/],
    ['{{ data | to_string | slice: 0, 6 }}', /may not show data$/],
    ['{{ data | json: "$.cvc" }}', /may not show data\.cvc/],
    ['{{ data.number | slice: 0, 7 }}', /data\.number/],
    ['{{ data.number | reveal_last: 5 }}', /data\.number/],
    ['{{ data.number | slice: -5, 2 }}', /data\.number/],
    ['{{ data.number | to_string }}', /data\.number/],
    [['ok', { deep: ['{{ data.number }}'] }], /data\.number/],
  ]
  for (const [mask, message] of refused) t.match(problems('card', mask), [message], JSON.stringify(mask))
})

t.test('other types', async (t) => {
  t.same(problems('card_number', '{{ data | slice: 0, 6 }}…{{ data | last4 }}'), [])
  t.match(problems('card_number', '{{ data }}'), [/data/])
  t.same(problems('bank', { r: '{{ data.routing_number }}', a: '{{ data.account_number | last4 }}' }), [])
  t.match(problems('bank', { a: '{{ data.account_number | slice: 0, 4 }}' }), [/account_number/])
  t.same(problems('us_bank_routing_number', '{{ data }}'), [])
  t.match(problems('social_security_number', '{{ data | slice: 0, 3 }}'), [/at most the last 4/])
  t.same(problems('employer_id_number', '{{ data | reveal_last: 4 }}'), [])
  t.same(problems('token', { a: '{{ data.any.thing | last4 }}' }), [], 'any JSON: the last four of any field')
  t.match(problems('token', '{{ data.password }}'), [/data\.password/])
  // Any JSON may hold arrays, whose slice keeps whole elements: only text may be sliced there.
  t.match(problems('token', '{{ data.list | slice: -1, 1 }}'), [/slice only text/])
  t.match(problems('token', '{{ data.list | slice: -1, 1 | to_string }}'), [/slice only text/])
  t.same(problems('token', '{{ data.list | to_string | slice: -4, 4 }}'), [])
})

t.test('allowedMask renders only masks within the limits', async (t) => {
  const card = getTokenType('card')
  t.equal(allowedMask(card, card.defaultMask), card.defaultMask)
  t.equal(allowedMask(card, { n: '{{ data.number }}' }), null, 'a stored mask past the limits fails closed')
  t.equal(allowedMask(card, { n: '{{ data.number }}' }), null, 'and again from the memo')
  t.equal(allowedMask(card, null), null)
  t.equal(allowedMask(card, '{{ unclosed'), null, 'an unparsable mask fails closed')
})

t.test('testsBeyondMask: an equality test tells a mask reader nothing beyond the mask and the default fingerprint', async (t) => {
  const beyond = (type: TokenTypeName, template: string) => testsBeyondMask(getTokenType(type), template)
  const within: [TokenTypeName, string][] = [
    ['card', '{{ data.number }}'],
    ['card', '{{ data | json: "$.number" }}'],
    ['card', '{{ data.number | last4 }}'],
    ['card', '{{ data.number | slice: 0, 6 }}:{{ data.expiration_month }}/{{ data.expiration_year }}'],
    ['card', '{{ data.number }}-{{ data.expiration_year }}'],
    ['card', 'constant'],
    ['card_number', '{{ data }}'],
    ['bank', '{{ data.account_number }}'],
    ['bank', '{{ data.routing_number }}'],
    ['social_security_number', '{{ data | last4 }}'],
    ['token', '{{ data }}'],
    ['token', '{{ data | to_string }}'],
    ['token', '{{ data.name | last4 }}'],
  ]
  for (const [type, template] of within) t.equal(beyond(type, template), false, `${type} ${template}`)
  const outside: [TokenTypeName, string][] = [
    ['card', '{{ data.cvc }}'],
    ['card', '{{ data.number }}{{ data.cvc }}'],
    ['card', '{{ data }}'],
    ['card', '{{ data.number | slice: 0, 12 }}'],
    ['card', '{{ data.number | slice: -8 }}'],
    ['card', '{{ data.number | reveal_last: 10 }}'],
    ['card_number', '{{ data | slice: 6, 6 }}'],
    ['bank', '{{ data.account_number | slice: 0, 4 }}'],
    ['social_security_number', '{{ data | slice: 0, 3 }}'],
    ['token', '{{ data.name }}'],
    ['token', '{{ data | json: "$.secret" }}'],
    ['token', '{{ data | slice: 0, 2 }}'],
    ['token', `{{ data | json: '$[""]' }}`],
    ['card', `{{ data | json: '$["number"][""]' }}`],
  ]
  for (const [type, template] of outside) t.equal(beyond(type, template), true, `${type} ${template}`)
})

t.test('the memo of checked masks keeps short masks only: long distinct ones are not held', async (t) => {
  const token = getTokenType('token')
  for (let i = 0; i < 50; i++) t.equal(allowedMask(token, `${'M'.repeat(100_000)}${i}`), `${'M'.repeat(100_000)}${i}`)
  t.ok(checkedMaskMemo().chars < 1000 * 4200, `bounded: ${checkedMaskMemo().chars} characters held`)
  allowedMask(token, 'short literal mask')
  t.ok(checkedMaskMemo().entries >= 1, 'short ones are still kept')
})
