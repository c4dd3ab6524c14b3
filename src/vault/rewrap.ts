import type { Store } from '../store/index.js'
import { DecryptError, rewrapDataKey, type Keyring } from './crypto/index.js'
import { checkMasterKeys, recordCheckValues, rewrapHashSecret } from './vault-keys.js'

/** A token whose data key could not be re-wrapped; ids and the cause only, never data. */
export interface RewrapFailure {
  tenantId: string
  tokenId: string
  keyId: string
  reason: string
}

export interface RewrapProgress {
  rewrapped: number
  skipped: number
  /** Tokens left under their old key because their data key does not unwrap with it (damaged rows, a key not configured). */
  failed: RewrapFailure[]
}

export interface RewrapOptions {
  batchSize?: number
  /** Once the keys are proven to open the database: how many data keys are to re-wrap. */
  onStart?: (total: number) => void
  onBatch?: (p: RewrapProgress) => void
}

type Row = Awaited<ReturnType<Store['tokens']['findWrappedNotUnder']>>[number]

/**
 * Re-wraps every data key under the keyring's primary master key, in batches, while the server
 * keeps running. Each row is swapped only if it still holds the exact wrapping that was read, so
 * a concurrent update is never overwritten; an interrupted run is resumed by running it again.
 * A row whose data key does not unwrap is recorded and passed, so one damaged row cannot stop
 * the rotation of the others.
 */
export async function rewrapAll(store: Store, keyring: Keyring, options: RewrapOptions = {}): Promise<RewrapProgress> {
  const batchSize = options.batchSize ?? 500
  const progress: RewrapProgress = { rewrapped: 0, skipped: 0, failed: [] }
  // Before anything is counted or reported: a wrong key must fail, not find nothing to do.
  await checkMasterKeys(store, keyring)
  // Before anything is wrapped under the new key: a server later started with another key of
  // that id must find it refused, not record its own and lock this one out.
  const mismatched = await recordCheckValues(store, keyring)
  if (mismatched.length) throw new DecryptError('authentication', `master key ${mismatched.join(', ')} does not match the key this database was encrypted with`)
  if (options.onStart) options.onStart(await store.tokens.countWrappedNotUnder(keyring.primaryId))
  await rewrapHashSecret(store, keyring)
  const failed = new Set<string>()
  // Passes over the rows in key order; a row changed meanwhile is met again by the next pass.
  for (;;) {
    const before = { rewrapped: progress.rewrapped, skipped: progress.skipped }
    await rewrapPass(store, keyring, batchSize, progress, failed, options)
    if (progress.rewrapped === before.rewrapped && progress.skipped === before.skipped) return progress
  }
}

async function rewrapPass(store: Store, keyring: Keyring, batchSize: number, progress: RewrapProgress, failed: Set<string>, options: RewrapOptions): Promise<void> {
  let after: Row | undefined
  for (;;) {
    const rows = await store.tokens.findWrappedNotUnder(keyring.primaryId, batchSize, after)
    if (rows.length === 0) return
    for (const row of rows) {
      const name = `${row.tenant_id}/${row.id}`
      if (failed.has(name)) continue
      const outcome = rewrapRow(row, keyring)
      if (outcome instanceof DecryptError) {
        failed.add(name)
        progress.failed.push({ tenantId: row.tenant_id, tokenId: row.id, keyId: row.key_id, reason: outcome.reason })
      } else if (await store.tokens.replaceWrapping(row, { key_id: outcome.keyId, encrypted_key: outcome.encryptedKey })) {
        progress.rewrapped++
      } else {
        progress.skipped++
      }
    }
    options.onBatch?.(progress)
    after = rows[rows.length - 1]
  }
}

function rewrapRow(row: Row, keyring: Keyring): ReturnType<typeof rewrapDataKey> | DecryptError {
  try {
    return rewrapDataKey({ keyId: row.key_id, encryptedKey: row.encrypted_key }, { tenantId: row.tenant_id, tokenId: row.id }, keyring)
  } catch (err) {
    if (err instanceof DecryptError) return err
    throw err
  }
}
