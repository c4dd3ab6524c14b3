import type { Database, TokenRecord } from '../store/index.js'

const CHANNEL = 'tessera_token_invalidate'
const MAX_ENTRIES = 20_000
// A second line behind NOTIFY: no entry outlives this even if an invalidation were missed.
const TTL_MS = 30_000

/** What the proxy, /detokenize and Reactors need of a token: scope, mask, and its data key. */
export interface UsableToken {
  record: Pick<TokenRecord, 'tenant_id' | 'id' | 'type' | 'containers' | 'mask' | 'ciphertext' | 'expires_at'>
  /** The unwrapped data key: it never leaves this process and the entry dies with the TTL. */
  dataKey: Buffer
}

interface Entry extends UsableToken {
  until: number
}

export interface TokenCache {
  get(tenantId: string, id: string): UsableToken | undefined
  /** Only stores when no invalidation happened since `generation` was read (no stale re-insert). */
  put(token: UsableToken, generation: number): void
  generation(): number
  /** Drops a token from every process's cache (update, delete). */
  invalidate(tenantId: string, id: string): Promise<void>
  start(): Promise<void>
}

/**
 * Detokenization is on the proxy's hot path: an unchanged token is served from memory, with
 * its ciphertext and unwrapped data key, so a request costs one AES-GCM open per token instead
 * of a query and two. Plaintext is never cached. Changes anywhere are announced with NOTIFY.
 */
export function createTokenCache(db: Database): TokenCache {
  const entries = new Map<string, Entry>()
  let generation = 0
  let enabled = true
  // The tenant id is a UUID, so the first colon separates it from any token id.
  const keyOf = (tenantId: string, id: string) => `${tenantId}:${id}`
  const drop = (key: string) => {
    generation++
    const entry = entries.get(key)
    entry?.dataKey.fill(0)
    entries.delete(key)
  }

  return {
    get(tenantId, id) {
      const key = keyOf(tenantId, id)
      const entry = entries.get(key)
      if (!entry) return undefined
      const now = Date.now()
      if (entry.until <= now || (entry.record.expires_at && entry.record.expires_at.getTime() <= now)) {
        drop(key)
        return undefined
      }
      return entry
    },
    put(token, seen) {
      if (!enabled || seen !== generation) return
      if (entries.size >= MAX_ENTRIES) {
        const oldest = entries.keys().next().value
        if (oldest !== undefined) drop(oldest)
      }
      entries.set(keyOf(token.record.tenant_id, token.record.id), { ...token, until: Date.now() + TTL_MS })
    },
    generation: () => generation,
    async invalidate(tenantId, id) {
      const key = keyOf(tenantId, id)
      drop(key)
      await db.notify(CHANNEL, key)
    },
    async start() {
      await db.listen(CHANNEL, drop)
      db.onListenerLost(() => {
        enabled = false
        for (const key of [...entries.keys()]) drop(key)
      })
    },
  }
}
