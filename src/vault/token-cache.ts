import { approximateBytes } from '../cache/approximate-bytes.js'
import type { Clock } from '../clock.js'
import { createInvalidatingCache } from '../cache/invalidating-cache.js'
import type { InvalidationBus } from '../cache/invalidation-bus.js'
import type { TokenRecord } from '../store/index.js'

/** What the proxy, /detokenize and Reactors need of a token: scope, mask, and its data key. */
export interface UsableToken {
  record: Pick<TokenRecord, 'tenant_id' | 'id' | 'type' | 'containers' | 'mask' | 'ciphertext' | 'expires_at'>
  /** The unwrapped data key: it never leaves this process and is wiped when the entry leaves. */
  dataKey: Buffer
  /** The additional data the ciphertext is bound to (not secret), computed once per entry rather than per open. */
  aad: Buffer
}

export interface TokenCache {
  get(tenantId: string, id: string): UsableToken | undefined
  /** Only stores when no invalidation happened since `generation` was read (no stale re-insert). */
  put(token: UsableToken, generation: number): void
  generation(): number
  /** Drops tokens from every process's cache (update, delete), in one NOTIFY statement. */
  invalidate(tenantId: string, ids: string | readonly string[]): Promise<void>
  start(): Promise<void>
}

/**
 * Detokenization is on the proxy's hot path: an unchanged token is served from memory, with
 * its ciphertext and unwrapped data key, so a request costs one AES-GCM open per token instead
 * of a query and two. Plaintext is never cached. An entry leaves at the token's own expiry.
 */
export function createTokenCache(bus: InvalidationBus, clock?: Clock): TokenCache {
  const cache = createInvalidatingCache<UsableToken>({
    bus,
    channel: 'tessera_token_invalidate',
    maxEntries: 20_000,
    maxBytes: 16 * 1024 * 1024,
    ttlMs: 30_000,
    sizeOf: (token) => approximateBytes(token.record) + approximateBytes(token.dataKey) + approximateBytes(token.aad),
    expiresAt: (token) => token.record.expires_at?.getTime(),
    onEvict: (token) => token.dataKey.fill(0),
    clock,
  })
  // The tenant id is a UUID, so the first colon separates it from any token id.
  const keyOf = (tenantId: string, id: string) => `${tenantId}:${id}`
  return {
    get: (tenantId, id) => cache.peek(keyOf(tenantId, id)),
    put: (token, seen) => cache.put(keyOf(token.record.tenant_id, token.record.id), token, seen),
    generation: () => cache.generation(),
    invalidate: (tenantId, ids) => cache.invalidate(typeof ids === 'string' ? keyOf(tenantId, ids) : ids.map((id) => keyOf(tenantId, id))),
    start: () => cache.start(),
  }
}
