import { randomUUID } from 'node:crypto'
import { inspect } from 'node:util'
import t from 'tap'
import { auditKeyring } from '../../../src/audit/audit-keys.js'
import { canonicalEntry, chainHash, checkpointSignatureValid, GENESIS_HASH, sealRows, signCheckpoint } from '../../../src/audit/chain.js'
import { eventToRow } from '../../../src/audit/rows.js'

const SECRET = 'k'.repeat(40)
const keyring = auditKeyring(undefined, SECRET)
const tenant = randomUUID()
const rows = [1, 2, 3].map(() => eventToRow({ tenantId: tenant, actor: { kind: 'application', id: randomUUID() }, action: 'token.read', outcome: 'success', status: 200, traceId: null, clientIp: null }, new Date()))

t.test('keys: derived per secret, named by a stable id, never printed', async (t) => {
  t.equal(auditKeyring(undefined, SECRET).primary.id, keyring.primary.id, 'same secret, same key id')
  t.match(keyring.primary.id, /^[0-9a-f]{16}$/)
  t.not(keyring.primary.chain.equals(keyring.primary.checkpoint), true, 'chain and checkpoint keys differ')
  const explicit = auditKeyring(`${'a'.repeat(32)},${'b'.repeat(32)}`, SECRET)
  t.not(explicit.primary.id, keyring.primary.id, 'SVC_AUDIT_SECRET seals when set')
  t.ok(explicit.byId(keyring.primary.id), 'the key-hash secret still verifies')
  t.ok(explicit.byId(auditKeyring(undefined, 'b'.repeat(32)).primary.id), 'so do later entries of SVC_AUDIT_SECRET')
  t.notMatch(inspect(explicit), /[0-9a-f]{32}/)
  t.equal(JSON.stringify(explicit), '{}')
})

t.test('sealing: consecutive seqs from the head, each hash over the previous one', async (t) => {
  const sealed = sealRows(keyring.primary, { seq: 10, hash: GENESIS_HASH }, rows)
  t.same(sealed.rows.map((r) => r.seq), [11, 12, 13])
  t.equal(sealed.seq, 13)
  t.equal(sealed.hash, sealed.rows[2]!.hash)
  let previous = GENESIS_HASH
  for (const row of sealed.rows) {
    const { hash, ...content } = row
    t.equal(chainHash(keyring.primary, previous, content), hash)
    previous = hash
  }
  // What the one-statement append stores: exactly the hashed content, then the hash.
  t.same(sealed.stored.map((s) => JSON.parse(s) as unknown), sealed.rows.map(({ hash, ...content }) => [...(JSON.parse(canonicalEntry(content)) as unknown[]), hash]))
})

t.test('every field is covered by the hash', async (t) => {
  const [row] = sealRows(keyring.primary, { seq: 0, hash: GENESIS_HASH }, rows).rows
  const { hash, ...content } = row!
  const changes: Record<string, unknown> = {
    tenant_id: randomUUID(), seq: 2, id: randomUUID(), occurred_at: new Date(content.occurred_at.getTime() + 1), actor_kind: 'session', actor_id: null,
    action: 'token.update', target_type: 'token', target_ids: ['x1y'], token_ids: ['x1y'], outcome: 'failure', status: 500, transform: 'mask',
    permission: 'token:read', trace_id: 't', client_ip: '10.0.0.1', request_method: 'GET', request_route: '/tokens', destination_origin: 'https://a.example',
    destination_method: 'GET', destination_status: 200, duration_ms: 1, parent_id: randomUUID(), key_id: '0000000000000000',
  }
  t.same(Object.keys(changes).sort(), Object.keys(content).sort(), 'the list above names every column')
  for (const [field, value] of Object.entries(changes)) {
    t.not(chainHash(keyring.primary, GENESIS_HASH, { ...content, [field]: value }), hash, `${field} changes the hash`)
  }
  t.not(chainHash(keyring.primary, 'f'.repeat(64), content), hash, 'the previous hash changes it')
  t.not(chainHash(auditKeyring(undefined, 'z'.repeat(40)).primary, GENESIS_HASH, content), hash, 'so does the key')
  t.match(canonicalEntry(content), /^\["tessera-audit\/1"/)
})

t.test('checkpoints: signed over tenant, seq, hash and time', async (t) => {
  const cp = signCheckpoint(keyring.primary, { tenant_id: tenant, seq: 5, hash: 'a'.repeat(64), created_at: new Date() })
  t.equal(cp.key_id, keyring.primary.id)
  t.ok(checkpointSignatureValid(keyring.primary, cp))
  t.notOk(checkpointSignatureValid(keyring.primary, { ...cp, seq: 6 }))
  t.notOk(checkpointSignatureValid(keyring.primary, { ...cp, hash: 'b'.repeat(64) }))
  t.notOk(checkpointSignatureValid(keyring.primary, { ...cp, created_at: new Date(cp.created_at.getTime() - 1) }))
  t.notOk(checkpointSignatureValid(keyring.primary, { ...cp, signature: 'zz' }))
})

// Logs written by earlier releases must keep verifying: these values were computed by the code
// that wrote them, and any change to the key derivation, the canonical form or the MAC breaks them.
t.test('known answers: key id, chain hashes and checkpoint signature are stable across releases', async (t) => {
  const key = auditKeyring(undefined, SECRET).primary
  const content = {
    tenant_id: '6f1c2a9e-3b4d-4e5f-8a7b-1c2d3e4f5a6b', seq: 1, id: '0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d', occurred_at: new Date('2026-01-02T03:04:05.678Z'),
    actor_kind: 'application' as const, actor_id: '11111111-2222-4333-8444-555555555555', action: 'proxy.request' as const, target_type: null, target_ids: [],
    token_ids: ['ab12cd34-0000-4000-8000-000000000001'], outcome: 'success' as const, status: 200, transform: null, permission: null, trace_id: 'trace-1',
    client_ip: '127.0.0.1', request_method: 'POST' as const, request_route: '/proxy', destination_origin: 'https://api.example.com', destination_method: 'POST' as const,
    destination_status: null, duration_ms: null, parent_id: null, key_id: key.id,
  }
  t.equal(key.id, '97326fdc79072869')
  t.equal(chainHash(key, GENESIS_HASH, content), 'c3efd587fae5ada079531b3a9eb4d450579a123c17e1eb4268fa1b2dff0a4641')
  const second = { ...content, id: '0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4e' }
  const sealed = sealRows(key, { seq: 0, hash: GENESIS_HASH }, [content, second])
  t.same(sealed.rows.map((r) => r.hash), ['c3efd587fae5ada079531b3a9eb4d450579a123c17e1eb4268fa1b2dff0a4641', '9941f7a8b915db8ff10f7302a022482642771f0598a2dcfa9583fe1c10eb97ed'])
  const cp = signCheckpoint(key, { tenant_id: content.tenant_id, seq: 2, hash: sealed.hash, created_at: new Date('2026-01-02T03:04:06Z') })
  t.equal(cp.signature, '2def154a549aff50f22a42a43b49d00efb9ec7da3e5a9f3cfe0aa49676f4c36c')
})
