import { Readable } from 'node:stream'
import t from 'tap'
import { redactForReplay, replayPolicy, storedAnswer } from '../../../src/http/idempotency-replay.js'

t.test('policies by path', async (t) => {
  t.equal(replayPolicy('/tokens/search'), 'skip')
  t.equal(replayPolicy('/V2/Tokens/Search/'), 'skip')
  t.equal(replayPolicy('/detokenize'), 'skip')
  t.equal(replayPolicy('/reactors/8a6e/react'), 'withhold')
  t.equal(replayPolicy('/tokens'), 'redact')
  t.equal(replayPolicy('/applications/1/regenerate'), 'redact')
})

t.test('credentials and token data leave every presented resource', async (t) => {
  const app = { id: 'a', tenant_id: 't', name: 'n', key: 'key_secret', permissions: [] }
  const token = { id: 'x', tenant_id: 't', type: 'card', data: { number: '4242' }, metadata: { key: 'kept: not a resource' } }
  t.same(redactForReplay(app), { id: 'a', tenant_id: 't', name: 'n', permissions: [] })
  t.same(redactForReplay({ tenant: { id: 't', name: 'x' }, application: app }), { tenant: { id: 't', name: 'x' }, application: { id: 'a', tenant_id: 't', name: 'n', permissions: [] } })
  t.same(redactForReplay({ card: token, ids: ['x'] }), { card: { id: 'x', tenant_id: 't', type: 'card', metadata: { key: 'kept: not a resource' } }, ids: ['x'] })
  t.same(redactForReplay({ session_key: 'key_s', nonce: 'n', expires_at: 'e' }), { expires_at: 'e' }, 'a new session keeps neither its key nor the nonce that authorizes it')
  t.same(redactForReplay({ pagination: {}, data: [token] }), { pagination: {}, data: [{ id: 'x', tenant_id: 't', type: 'card', metadata: { key: 'kept: not a resource' } }] }, 'a list keeps its data array')
})

t.test('what is stored', async (t) => {
  t.same(storedAnswer(204, undefined, 'redact'), { status: 204, body: null, withheld: false })
  t.same(storedAnswer(201, { id: 'a', tenant_id: 't', key: 'k' }, 'redact'), { status: 201, body: '{"id":"a","tenant_id":"t"}', withheld: false })
  t.same(storedAnswer(200, { raw: 'anything' }, 'withhold'), { status: 200, body: null, withheld: true })
  t.same(storedAnswer(200, 'text', 'redact'), { status: 200, body: null, withheld: true }, 'not JSON: withheld')
  t.same(storedAnswer(200, Buffer.from('x'), 'redact').withheld, true)
  t.same(storedAnswer(200, Readable.from([]), 'redact').withheld, true)
})
