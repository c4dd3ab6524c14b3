import type { AuditRepository, AuditRow, ChainEntry, ChainHead, ChainReader, CheckpointRow } from '../store/index.js'
import type { AuditKeyring } from './audit-keys.js'
import { chainHash, checkpointSignatureValid, GENESIS_HASH, sameHex } from './chain.js'
import { DAY_MS } from './maintenance.js'
import { isInstant } from '../shapes/date-time.js'

export type BreakReason =
  /** The entry does not hash to its stored hash after its predecessor: changed, moved or inserted. */
  | 'altered'
  /** An entry the chain needs is not there (deleted, or the chain's start removed without an anchor). */
  | 'missing'
  /** An entry beyond the chain head. */
  | 'unexpected'
  /** Sealed with a key id none of the configured audit secrets has. */
  | 'unknown_key'
  /** A checkpoint whose signature does not match. */
  | 'checkpoint_invalid'
  /** A checkpoint naming a different hash than the entry at its seq. */
  | 'checkpoint_mismatch'
  /** Entries were removed up to a checkpoint younger than the retention period. */
  | 'pruned_within_retention'
  /** The chain head does not name the last entry. */
  | 'head_mismatch'

export interface ChainBreak {
  seq: number
  entryId?: string
  reason: BreakReason
  detail: string
}

export interface TenantChainReport {
  tenantId: string
  ok: boolean
  entries: number
  firstSeq: number | null
  lastSeq: number | null
  checkpoints: number
  /** The checkpoint the retained chain starts from after pruning, if any. */
  anchorSeq: number | null
  break?: ChainBreak
}

export interface AuditVerification {
  ok: boolean
  tenants: TenantChainReport[]
}

export interface VerifyOptions {
  retentionDays: number
  now?: Date
  tenantId?: string
  /** Entries read per query (memory stays bounded by this). */
  chunk?: number
  /**
   * With `tenantId`: an entry known from outside the database (an export, a SIEM) that the chain
   * must still hold. It catches what no in-database check can: the newest entries deleted with
   * the checkpoints after them and the head moved back.
   */
  expect?: ExpectedEntry
}

export interface ExpectedEntry {
  seq: number
  hash: string
}

/**
 * Walks each tenant's chain in seq order on one consistent snapshot and reports, per tenant,
 * the first broken link: an altered, deleted, reordered or inserted entry, a bad or mismatched
 * checkpoint, or a start removed other than by retention pruning. A pruned chain is verified
 * from its anchor, the oldest retained checkpoint, which must be older than the retention period.
 */
export async function verifyAuditChain(repo: Pick<AuditRepository, 'snapshot'>, keyring: AuditKeyring, options: VerifyOptions): Promise<AuditVerification> {
  const oldestAnchor = new Date((options.now ?? new Date()).getTime() - options.retentionDays * DAY_MS)
  return repo.snapshot(async (reader) => {
    const ids = options.tenantId ? [options.tenantId] : await reader.tenantIds()
    const tenants: TenantChainReport[] = []
    const expect = options.tenantId ? options.expect : undefined
    for (const id of ids) tenants.push(await verifyTenant(reader, id, { keyring, oldestAnchor, chunk: options.chunk ?? 1000, expect }))
    return { ok: tenants.every((t) => t.ok), tenants }
  })
}

interface Context {
  keyring: AuditKeyring
  oldestAnchor: Date
  chunk: number
  expect: ExpectedEntry | undefined
}

async function verifyTenant(reader: ChainReader, tenantId: string, ctx: Context): Promise<TenantChainReport> {
  const head = await reader.head(tenantId)
  const checkpoints = await reader.checkpoints(tenantId)
  const report: TenantChainReport = { tenantId, ok: true, entries: 0, firstSeq: null, lastSeq: null, checkpoints: checkpoints.length, anchorSeq: null }
  const breaks: ChainBreak[] = checkpoints.flatMap((cp) => checkpointProblem(cp, ctx.keyring) ?? [])

  // From the lowest seq there is, with no bound: a row inserted below 1 (even below -2^53) must be found too.
  let batch = await reader.entries(tenantId, null, ctx.chunk)
  const start = startOfChain(batch[0], head, checkpoints, ctx.oldestAnchor)
  if ('break' in start) breaks.push(start.break)
  else {
    report.anchorSeq = start.anchor?.seq ?? null
    const bySeq = new Map(checkpoints.map((c) => [c.seq, c]))
    let link = { seq: start.anchor?.seq ?? 0, hash: start.anchor?.hash ?? GENESIS_HASH }
    walk: while (batch.length > 0) {
      for (const row of batch) {
        const problem = entryProblem(row, link, head, bySeq.get(row.seq), ctx.keyring) ?? unexpectedHash(row, ctx.expect)
        if (problem) {
          breaks.push(problem)
          break walk
        }
        report.firstSeq ??= row.seq
        report.lastSeq = row.seq
        report.entries += 1
        link = { seq: row.seq, hash: row.hash }
      }
      batch = await reader.entries(tenantId, link.seq, ctx.chunk)
    }
    if (breaks.length === 0) breaks.push(...endProblem(link, head, checkpoints))
    if (breaks.length === 0 && ctx.expect && ctx.expect.seq > link.seq) {
      const { seq } = ctx.expect
      breaks.push({ seq: link.seq + 1, reason: 'missing', detail: `entries ${link.seq + 1} to ${seq} are missing: entry ${seq} was expected, the chain ends at ${link.seq}` })
    }
  }
  const first = breaks.sort((a, b) => a.seq - b.seq)[0]
  if (first) Object.assign(report, { ok: false, break: first })
  return report
}

function checkpointProblem(cp: CheckpointRow, keyring: AuditKeyring): ChainBreak | undefined {
  const key = keyring.byId(cp.key_id)
  if (!key) return { seq: cp.seq, reason: 'unknown_key', detail: `checkpoint ${cp.seq} was signed with key ${cp.key_id}, which no configured audit secret yields` }
  if (!isInstant(cp.created_at) || !checkpointSignatureValid(key, cp)) return { seq: cp.seq, reason: 'checkpoint_invalid', detail: `checkpoint ${cp.seq} does not match its signature` }
  return undefined
}

type Start = { anchor?: CheckpointRow } | { break: ChainBreak }

/** Where verification begins: the genesis, or the anchor checkpoint just before the oldest retained entry. */
function startOfChain(first: AuditRow | undefined, head: ChainHead | undefined, checkpoints: CheckpointRow[], oldestAnchor: Date): Start {
  const firstSeq = first?.seq ?? (head ? head.seq + 1 : 1)
  if (firstSeq === 1) return {}
  if (first && firstSeq < 1) return { break: { seq: firstSeq, entryId: first.id, reason: 'unexpected', detail: `entry ${firstSeq} lies before the chain's first entry (1)` } }
  const anchor = checkpoints[0]
  if (!anchor || anchor.seq > firstSeq - 1) {
    return { break: { seq: 1, reason: 'missing', detail: `entries 1 to ${firstSeq - 1} are missing and no checkpoint anchors entry ${firstSeq}` } }
  }
  if (anchor.seq < firstSeq - 1) {
    return { break: { seq: anchor.seq + 1, reason: 'missing', detail: `entries ${anchor.seq + 1} to ${firstSeq - 1} are missing after checkpoint ${anchor.seq}` } }
  }
  if (anchor.created_at >= oldestAnchor) {
    return { break: { seq: anchor.seq, reason: 'pruned_within_retention', detail: `entries up to ${anchor.seq} were removed, but checkpoint ${anchor.seq} is younger than the retention period` } }
  }
  return { anchor }
}

function entryProblem(row: ChainEntry, link: { seq: number; hash: string }, head: ChainHead | undefined, checkpoint: CheckpointRow | undefined, keyring: AuditKeyring): ChainBreak | undefined {
  const at = { seq: row.seq, entryId: row.id }
  if (row.seq !== link.seq + 1) return { seq: link.seq + 1, reason: 'missing', detail: `entry ${link.seq + 1} is missing (the next entry is ${row.seq})` }
  if (!head || row.seq > head.seq) return { ...at, reason: 'unexpected', detail: `entry ${row.seq} lies beyond the chain head (${head?.seq ?? 'none'})` }
  const key = keyring.byId(row.key_id)
  if (!key) return { ...at, reason: 'unknown_key', detail: `entry ${row.seq} was sealed with key ${row.key_id}, which no configured audit secret yields` }
  const { hash, sub_ms: subMs, ...content } = row
  if (subMs || !isInstant(row.occurred_at) || !sameHex(chainHash(key, link.hash, content), hash)) return { ...at, reason: 'altered', detail: `entry ${row.seq} does not match its hash: it was changed, moved or inserted` }
  if (checkpoint && checkpoint.hash !== row.hash) return { ...at, reason: 'checkpoint_mismatch', detail: `checkpoint ${row.seq} names a different hash than entry ${row.seq}` }
  return undefined
}

function unexpectedHash(row: AuditRow, expect: ExpectedEntry | undefined): ChainBreak | undefined {
  if (!expect || row.seq !== expect.seq || row.hash === expect.hash) return undefined
  return { seq: row.seq, entryId: row.id, reason: 'altered', detail: `entry ${row.seq} does not carry the expected hash: the chain was rewritten from there or before` }
}

/** After the last entry: the head and every checkpoint must point at or before it. */
function endProblem(link: { seq: number; hash: string }, head: ChainHead | undefined, checkpoints: CheckpointRow[]): ChainBreak[] {
  const next = link.seq + 1
  if (!head) return link.seq === 0 && checkpoints.length === 0 ? [] : [{ seq: link.seq, reason: 'head_mismatch', detail: 'the chain head is missing' }]
  if (head.seq > link.seq) return [{ seq: next, reason: 'missing', detail: `entries ${next} to ${head.seq} are missing (the head is at ${head.seq})` }]
  const beyond = checkpoints.find((c) => c.seq > link.seq)
  if (beyond) return [{ seq: next, reason: 'missing', detail: `entries ${next} to ${beyond.seq} are missing (checkpoint ${beyond.seq} exists)` }]
  if (!sameHex(head.hash, link.hash)) return [{ seq: link.seq, reason: 'head_mismatch', detail: `the chain head does not name entry ${link.seq}` }]
  // Pruning keeps the newest checkpoint, so the one the head names is always there.
  if (head.checkpoint_seq > head.seq) {
    return [{ seq: head.seq, reason: 'head_mismatch', detail: `the chain head names checkpoint ${head.checkpoint_seq}, beyond its last entry ${head.seq}` }]
  }
  if (head.checkpoint_seq > 0 && !checkpoints.some((c) => c.seq === head.checkpoint_seq)) {
    return [{ seq: head.checkpoint_seq, reason: 'missing', detail: `checkpoint ${head.checkpoint_seq}, which the chain head names, is missing` }]
  }
  return []
}
