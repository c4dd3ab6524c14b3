import type { AuditRepository, ChainHead, CheckpointRow } from '../store/index.js'
import type { AuditKey } from './audit-keys.js'
import { signCheckpoint } from './chain.js'

export const DAY_MS = 24 * 60 * 60 * 1000

/** A signed checkpoint at `head`, or none when nothing was appended since the last one. */
export function checkpointAt(key: AuditKey, head: ChainHead, now: Date): CheckpointRow | undefined {
  if (head.seq <= head.checkpoint_seq) return undefined
  return signCheckpoint(key, { tenant_id: head.tenant_id, seq: head.seq, hash: head.hash, created_at: now })
}

/**
 * Checkpoints every chain that moved since its last checkpoint, so even a tenant that went
 * quiet gets an anchor its old entries can be pruned up to. Safe in several processes at once:
 * each head is locked while its checkpoint is written, and a second one finds nothing new.
 */
export async function checkpointChains(repo: AuditRepository, key: AuditKey, now: Date, timeoutMs: number): Promise<number> {
  let made = 0
  for (const head of await repo.headsBehindCheckpoint()) {
    if (await repo.checkpointHead(head.tenant_id, (locked) => checkpointAt(key, locked, now), timeoutMs)) made += 1
  }
  return made
}

/**
 * Removes entries older than the retention period, but only up to a checkpoint created before
 * the cutoff: what remains still verifies from that checkpoint, and no entry younger than the
 * retention period can go (the verifier checks that the anchor is older than the period).
 */
export async function pruneExpired(repo: AuditRepository, retentionDays: number, now: Date): Promise<number> {
  // A process clock that jumped ahead (a bad NTP step, a wrong RTC at boot) would take entries
  // still within the period, for good: the database's clock is a second opinion, and the
  // earlier of the two decides.
  const at = Math.min(now.getTime(), (await repo.databaseNow()).getTime())
  const cutoff = new Date(at - retentionDays * DAY_MS)
  let removed = 0
  for (const tenantId of await repo.tenantsWithCheckpoints(cutoff)) removed += await repo.pruneTenant(tenantId, cutoff)
  return removed
}
