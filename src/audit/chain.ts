import { createHmac, timingSafeEqual } from 'node:crypto'
import type { AuditRow, ChainHead, CheckpointRow, UnsealedAuditRow } from '../store/index.js'
import type { AuditKey } from './audit-keys.js'

/** The "previous hash" of a tenant's first entry. */
export const GENESIS_HASH = '0'.repeat(64)

/**
 * Every stored column of an entry except its own hash, in a fixed order. JSON of an array of
 * strings, numbers and nulls is unambiguous and byte-for-byte stable, so the verifier rebuilds
 * exactly what the writer hashed from the row as the database returns it.
 */
export function canonicalEntry(row: Omit<AuditRow, 'hash'>): string {
  return JSON.stringify([
    'tessera-audit/1', row.tenant_id, row.seq, row.id, isoTime(row.occurred_at), row.actor_kind, row.actor_id, row.action,
    row.target_type, row.target_ids, row.token_ids, row.outcome, row.status, row.transform, row.permission, row.trace_id, row.client_ip,
    row.request_method, row.request_route, row.destination_origin, row.destination_method, row.destination_status, row.duration_ms,
    row.parent_id, row.key_id,
  ])
}

// The events of one request share their time, and under load so do many of a batch (the time is
// in milliseconds): format it once per distinct time, not once per entry.
let lastTime: number | undefined
let lastIso = ''
function isoTime(at: Date): string {
  const time = at.getTime()
  if (time !== lastTime) {
    lastIso = at.toISOString()
    lastTime = time
  }
  return lastIso
}

/** HMAC(previous entry's hash, this entry's content): altering, removing or moving a row breaks the next link. */
export function chainHash(key: AuditKey, previousHash: string, row: Omit<AuditRow, 'hash'>): string {
  return hashEntry(key, previousHash, canonicalEntry(row))
}

function hashEntry(key: AuditKey, previousHash: string, canonical: string): string {
  return createHmac('sha256', key.chain).update(`${previousHash}\n${canonical}`).digest('hex')
}

/**
 * An entry as the one-statement append stores it (see the audit repository's APPEND_COLUMNS):
 * its canonical array with its hash appended, so the content is serialized once, for the hash
 * and the insert together. The hash is hex: it needs no escaping.
 */
function storedEntry(canonical: string, hash: string): string {
  return `${canonical.slice(0, -1)},"${hash}"]`
}

/**
 * Appends `rows` (in order) to the chain whose head is `head`, sealing them in place; returns
 * them, each as the append statement stores it (`stored`), and the new head.
 */
export function sealRows(key: AuditKey, head: Pick<ChainHead, 'seq' | 'hash'>, rows: readonly UnsealedAuditRow[]): { rows: AuditRow[]; stored: string[]; seq: number; hash: string } {
  let { seq, hash } = head
  const stored: string[] = []
  const sealed = rows.map((row) => {
    seq += 1
    // Sealed in place: the row is the writer's own, and sealing it again (on a head that moved)
    // overwrites all three fields. canonicalEntry names its fields, so the hash is not hashed.
    const entry = row as AuditRow
    entry.seq = seq
    entry.key_id = key.id
    const canonical = canonicalEntry(entry)
    entry.hash = hash = hashEntry(key, hash, canonical)
    stored.push(storedEntry(canonical, hash))
    return entry
  })
  return { rows: sealed, stored, seq, hash }
}

export function signCheckpoint(key: AuditKey, cp: Omit<CheckpointRow, 'signature' | 'key_id'>): CheckpointRow {
  const unsigned = { ...cp, key_id: key.id }
  return { ...unsigned, signature: checkpointMac(key, unsigned) }
}

export function checkpointSignatureValid(key: AuditKey, cp: CheckpointRow): boolean {
  return sameHex(checkpointMac(key, cp), cp.signature)
}

const HASH_HEX = /^[0-9a-f]{64}$/

/** Two hashes as written (lower-case hex, 32 bytes), compared in constant time; any other spelling differs. */
export function sameHex(a: string, b: string): boolean {
  return HASH_HEX.test(a) && HASH_HEX.test(b) && timingSafeEqual(Buffer.from(a, 'hex'), Buffer.from(b, 'hex'))
}

function checkpointMac(key: AuditKey, cp: Omit<CheckpointRow, 'signature'>): string {
  const content = JSON.stringify(['tessera-audit-checkpoint/1', cp.tenant_id, cp.seq, cp.hash, cp.created_at.toISOString(), cp.key_id])
  return createHmac('sha256', key.checkpoint).update(content).digest('hex')
}
