import type { Store } from '../store/index.js'
import { rewrapDataKey, type Keyring } from './crypto/index.js'
import { checkMasterKeys, rewrapHashSecret } from './vault-keys.js'

export interface RewrapProgress {
  rewrapped: number
  skipped: number
}

export interface RewrapOptions {
  batchSize?: number
  /** Once the keys are proven to open the database: how many data keys are to re-wrap. */
  onStart?: (total: number) => void
  onBatch?: (p: RewrapProgress) => void
}

/**
 * Re-wraps every data key under the keyring's primary master key, in batches, while the server
 * keeps running. Each row is swapped only if it still holds the wrapping that was read, so a
 * concurrent update (which already writes under the primary key) is never overwritten; an
 * interrupted run is resumed by running it again.
 */
export async function rewrapAll(store: Store, keyring: Keyring, options: RewrapOptions = {}): Promise<RewrapProgress> {
  const batchSize = options.batchSize ?? 500
  const progress: RewrapProgress = { rewrapped: 0, skipped: 0 }
  // Before anything is counted or reported: a wrong key must fail, not find nothing to do.
  await checkMasterKeys(store, keyring)
  if (options.onStart) options.onStart(await store.tokens.countWrappedNotUnder(keyring.primaryId))
  await rewrapHashSecret(store, keyring)
  for (;;) {
    const rows = await store.tokens.findWrappedNotUnder(keyring.primaryId, batchSize)
    if (rows.length === 0) return progress
    let changed = 0
    for (const row of rows) {
      const next = rewrapDataKey({ keyId: row.key_id, encryptedKey: row.encrypted_key }, { tenantId: row.tenant_id, tokenId: row.id }, keyring)
      if (await store.tokens.replaceWrapping(row, { key_id: next.keyId, encrypted_key: next.encryptedKey })) {
        progress.rewrapped++
        changed++
      } else {
        progress.skipped++
      }
    }
    options.onBatch?.(progress)
    // Every row of the batch was changed under us: read again rather than spin on stale rows.
    if (changed === 0 && rows.length < batchSize) continue
  }
}
