import t from 'tap'
import { startTestApp, type TestApp } from '../helpers/app.js'
import { appKey } from '../helpers/tokens.js'

// A fingerprint is the hash of what the token's OWN fingerprint expression renders, so another
// expression (literal text, another field) can give a token holding other data the fingerprint
// of a value. Deduplication therefore matches only tokens made by the same effective expression,
// and expressions and search indexes must refer to the data.

const MERGE = { 'content-type': 'application/merge-patch+json' }
const VISA = '4242424242424242'
const OTHER_VISA = '4000056655665556'

async function keys(app: TestApp) {
  // Create/read/update with mask, in /shared/ only: enough to plant a token.
  const attacker = await appKey(app, { type: 'private', rules: [{ priority: 1, container: '/shared/', transform: 'mask', permissions: ['token:create', 'token:read', 'token:update'] }] })
  const victim = await appKey(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read', 'token:update', 'token:use', 'token:search'] }] })
  return { attacker, victim }
}

t.test('a fingerprint expression or search index of literal text alone is refused', async (t) => {
  const app = await startTestApp(t)
  const { attacker, victim } = await keys(app)
  const create = (body: Record<string, unknown>) => app.request('POST', '/tokens', { key: attacker, body: { type: 'card_number', data: OTHER_VISA, containers: ['/shared/'], ...body } })

  const literal = await create({ fingerprint_expression: VISA })
  t.equal(literal.status, 400, literal.text)
  t.equal(literal.body.type, '/problems/validation', 'a validation problem as any other')
  t.match(literal.body.errors, { fingerprint_expression: [/must refer to the token data/] })
  const index = await create({ search_indexes: ['{{ data }}', VISA] })
  t.equal(index.status, 400)
  t.match(index.body.errors, { 'search_indexes[1]': [/must refer to the token data/] })
  t.notOk(index.body.errors['search_indexes[0]'], 'an index of the data is fine')

  const tokenized = await app.request('POST', '/tokenize', { key: attacker, body: { a: { type: 'card_number', data: OTHER_VISA, containers: ['/shared/'], fingerprint_expression: VISA } } })
  t.equal(tokenized.status, 400)
  t.match(tokenized.body.errors, { 'a.fingerprint_expression': [/must refer to the token data/] })

  const own = await app.request('POST', '/tokens', { key: victim, body: { type: 'card_number', data: OTHER_VISA } })
  t.equal(own.status, 201)
  const patched = await app.request('PATCH', `/tokens/${own.body.id}`, { key: victim, headers: MERGE, body: { search_indexes: [VISA] } })
  t.equal(patched.status, 400, 'nor can a PATCH set one')
  t.match(patched.body.errors, { 'search_indexes[0]': [/must refer to the token data/] })
})

t.test('deduplication never answers with a token whose own expression renders the value from other data', async (t) => {
  const app = await startTestApp(t)
  const { attacker, victim } = await keys(app)
  // Literal text around a reference that renders nothing passes validation; the data renders only the text.
  const planted = await app.request('POST', '/tokens', { key: attacker, body: { type: 'card_number', data: OTHER_VISA, containers: ['/shared/'], fingerprint_expression: `${VISA}{{ data | slice: 0, 0 }}` } })
  t.equal(planted.status, 201, planted.text)
  const created = await app.request('POST', '/tokens', { key: victim, body: { type: 'card_number', data: VISA, containers: ['/payments/'], deduplicate_token: true } })
  t.equal(created.status, 201)
  t.not(created.body.id, planted.body.id, 'the victim does not get the planted token')
  t.equal(created.body.data, VISA)

  // Same account, another routing number, made equal by a partly literal expression.
  const bank = (routing_number: string) => ({ routing_number, account_number: '000123456789' })
  const plantedBank = await app.request('POST', '/tokens', { key: attacker, body: { type: 'bank', data: bank('011000015'), containers: ['/shared/'], fingerprint_expression: '021000021:{{ data.account_number }}' } })
  t.equal(plantedBank.status, 201, plantedBank.text)
  const viaPost = await app.request('POST', '/tokens', { key: victim, body: { type: 'bank', data: bank('021000021'), containers: ['/payroll/'], deduplicate_token: true } })
  t.not(viaPost.body.id, plantedBank.body.id, 'POST /tokens: not the planted bank token')
  const viaTokenize = await app.request('POST', '/tokenize', { key: victim, body: { acct: { type: 'bank', data: bank('021000021'), containers: ['/payroll/'], deduplicate_token: true } } })
  t.equal(viaTokenize.status, 200)
  t.not(viaTokenize.body.acct.id, plantedBank.body.id, '/tokenize: not the planted bank token')
  t.equal(viaTokenize.body.acct.id, viaPost.body.id, 'but the token of the same value and expression')

  // The attacker changing its token's data changes nothing the victim holds.
  const swap = await app.request('PATCH', `/tokens/${planted.body.id}`, { key: attacker, headers: MERGE, body: { data: '5555555555554444' } })
  t.equal(swap.status, 200)
  const now = await app.request('POST', '/detokenize', { key: victim, body: { v: `{{ ${created.body.id} }}` } })
  t.same(now.body, { v: VISA })
})

t.test('no expression and the type default spelled out are one expression; any other is another value', async (t) => {
  const app = await startTestApp(t)
  const { victim } = await keys(app)
  const create = async (body: Record<string, unknown>) => {
    const res = await app.request('POST', '/tokens', { key: victim, body: { type: 'bank', deduplicate_token: true, ...body } })
    t.equal(res.status, 201, res.text)
    return res.body as { id: string; fingerprint_expression: string | null }
  }
  const data = { routing_number: '021000021', account_number: '000123456789' }
  const DEFAULT = '{{ data.routing_number }}:{{ data.account_number }}'
  const implicit = await create({ data })
  t.equal((await create({ data, fingerprint_expression: DEFAULT })).id, implicit.id, 'the default spelled out finds the token stored without one')
  const explicitFirst = await create({ data: { ...data, account_number: '1' }, fingerprint_expression: DEFAULT })
  t.equal((await create({ data: { ...data, account_number: '1' } })).id, explicitFirst.id, 'and the other way round')
  const spaced = await create({ data, fingerprint_expression: '{{data.routing_number}}:{{data.account_number}}' })
  t.not(spaced.id, implicit.id, 'expressions compare as written')

  // In one /tokenize call: the same value made by two expressions is two tokens, one by the same expression one.
  const other = { routing_number: '011000015', account_number: '000123456789' }
  const literal = '021000021:{{ data.account_number }}'
  const res = await app.request('POST', '/tokenize', {
    key: victim,
    body: {
      a: { type: 'bank', data: other, fingerprint_expression: literal, deduplicate_token: true },
      b: { type: 'bank', data, deduplicate_token: true },
      c: { type: 'bank', data: other, fingerprint_expression: literal, deduplicate_token: true },
    },
  })
  t.equal(res.status, 200, res.text)
  t.equal(res.body.b.id, implicit.id, 'the default expression finds the stored token')
  t.not(res.body.a.id, implicit.id, 'another expression does not')
  t.equal(res.body.c.id, res.body.a.id, 'one expression and value in one call is one token')
  t.same(res.body.a.data, other)
})

t.test('data: search never returns a token for literal text of its search index', async (t) => {
  const app = await startTestApp(t)
  const { attacker, victim } = await keys(app)
  const planted = await app.request('POST', '/tokens', { key: attacker, body: { type: 'card_number', data: OTHER_VISA, containers: ['/shared/'], search_indexes: [`${VISA}{{ data.missing }}`] } })
  t.equal(planted.status, 201, planted.text)
  const own = await app.request('POST', '/tokens', { key: victim, body: { type: 'card_number', data: VISA, containers: ['/payments/'], search_indexes: ['{{ data }}'] } })
  t.equal(own.status, 201)
  for (const path of ['/tokens/search', '/v2/tokens/search']) {
    const found = await app.request('POST', path, { key: victim, body: { query: `data:${VISA}` } })
    t.equal(found.status, 200)
    t.same(
      found.body.data.map((token: { id: string }) => token.id),
      [own.body.id],
      `${path}: only the token holding the value`,
    )
  }
})
