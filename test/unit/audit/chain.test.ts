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
