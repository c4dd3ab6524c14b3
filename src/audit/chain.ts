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
    'tessera-audit/1', row.tenant_id, row.seq, row.id, row.occurred_at.toISOString(), row.actor_kind, row.actor_id, row.action,
    row.target_type, row.target_ids, row.token_ids, row.outcome, row.status, row.transform, row.permission, row.trace_id, row.client_ip,
    row.request_method, row.request_route, row.destination_origin, row.destination_method, row.destination_status, row.duration_ms,
    row.parent_id, row.key_id,
  ])
}

/** HMAC(previous entry's hash, this entry's content): altering, removing or moving a row breaks the next link. */
export function chainHash(key: AuditKey, previousHash: string, row: Omit<AuditRow, 'hash'>): string {
  return createHmac('sha256', key.chain).update(previousHash).update('\n').update(canonicalEntry(row)).digest('hex')
}

/** Appends `rows` (in order) to the chain whose head is `head`, sealing them in place; returns them and the new head. */
export function sealRows(key: AuditKey, head: Pick<ChainHead, 'seq' | 'hash'>, rows: readonly UnsealedAuditRow[]): { rows: AuditRow[]; seq: number; hash: string } {
  let { seq, hash } = head
  const sealed = rows.map((row) => {
    seq += 1
    // Sealed in place: the row is the writer's own, and sealing it again (on a head that moved)
    // overwrites all three fields. canonicalEntry names its fields, so the hash is not hashed.
    const entry = row as AuditRow
    entry.seq = seq
    entry.key_id = key.id
    entry.hash = hash = chainHash(key, hash, entry)
    return entry
  })
  return { rows: sealed, seq, hash }
}

export function signCheckpoint(key: AuditKey, cp: Omit<CheckpointRow, 'signature' | 'key_id'>): CheckpointRow {
  const unsigned = { ...cp, key_id: key.id }
  return { ...unsigned, signature: checkpointMac(key, unsigned) }
}

export function checkpointSignatureValid(key: AuditKey, cp: CheckpointRow): boolean {
  return sameHex(checkpointMac(key, cp), cp.signature)
}

export function sameHex(a: string, b: string): boolean {
  const x = Buffer.from(a, 'hex')
  const y = Buffer.from(b, 'hex')
  return x.length === 32 && y.length === 32 && timingSafeEqual(x, y)
}

function checkpointMac(key: AuditKey, cp: Omit<CheckpointRow, 'signature'>): string {
  const content = JSON.stringify(['tessera-audit-checkpoint/1', cp.tenant_id, cp.seq, cp.hash, cp.created_at.toISOString(), cp.key_id])
  return createHmac('sha256', key.checkpoint).update(content).digest('hex')
}
