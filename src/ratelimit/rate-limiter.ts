import { mapScopes, type Config, type RateScope } from '../config/index.js'
import { compileScopeHits, selectRouteScope } from './scopes.js'
import { FallbackStore } from './stores/fallback.js'
import { LeaseStore } from './stores/leases.js'
import { MemoryStore } from './stores/memory.js'
import { RedisStore } from './stores/redis.js'
import type { RateLimitLogger, RateLimitStore, ScopeHit } from './types.js'

/** The RateLimit-Limit, -Remaining and -Reset values (IETF httpapi draft): the scope closest to its limit. */
export interface RateLimitQuota {
  limit: number
  remaining: number
  /** Whole seconds, rounded up. */
  resetSeconds: number
}

export type RateLimitDecision = ({ allowed: true } | { allowed: false; scope: RateScope; retryAfterSeconds: number }) & { quota?: RateLimitQuota }

export interface RateLimiterStatus {
  store: 'redis' | 'memory' | 'disabled'
  /**
   * Redis is configured but unreachable (the last call failed, or the connection is down):
   * limits are counted per process for now.
   */
  degraded: boolean
}

export interface RateLimiter {
  /** Counts one request of `ip` in `global` and in its route's scope. */
  check(ip: string, method: string, path: string): Promise<RateLimitDecision>
  status(): RateLimiterStatus
  close(): Promise<void>
}

export interface CreateRateLimiterOptions {
  config: Config
  logger: RateLimitLogger
  /** Redis key namespace (default `tessera:rl:`); tests pass a unique one. */
  keyPrefix?: string
  /** Milliseconds clock of the in-process windows; tests inject one. */
  now?: () => number
  /** While Redis is down, how often one request tries it again (default 1000 ms). */
  probeIntervalMs?: number
}

const ALLOWED: RateLimitDecision = Object.freeze({ allowed: true })
const toSeconds = (ms: number) => Math.max(1, Math.ceil(ms / 1000))

/** Redis windows, leased a few units at a time (stores/leases.ts), with an in-process fallback when `config.redisUrl` is set; otherwise in process. */
export function createRateLimiter(options: CreateRateLimiterOptions): RateLimiter {
  const { config, logger, now } = options
  if (!config.rateLimit.enabled) return disabledLimiter()
  const memory = new MemoryStore({ now })
  let store: RateLimitStore = memory
  let fallback: FallbackStore | undefined
  let redis: RedisStore | undefined
  if (config.redisUrl !== undefined) {
    redis = new RedisStore({
      url: config.redisUrl,
      commandTimeoutMs: config.rateLimit.redisCommandTimeoutMs,
      keyPrefix: options.keyPrefix ?? config.rateLimit.keyPrefix,
    })
    fallback = new FallbackStore(new LeaseStore(redis, { now, percent: config.rateLimit.leasePercent }), memory, logger, { probeIntervalMs: options.probeIntervalMs, now })
    store = fallback
  }
  const scopeLists = compileScopeLists(config.rateLimit)
  return {
    async check(ip, method, path) {
      const route = selectRouteScope(method, path)
      const decision = await store.hit(ip, route ? scopeLists[route] : scopeLists.none)
      // Seconds round up, so a client that obeys Retry-After or RateLimit-Reset is never early.
      const quota = { limit: decision.quota.limit, remaining: decision.quota.remaining, resetSeconds: toSeconds(decision.quota.resetMs) }
      if (decision.allowed) return { allowed: true, quota }
      return { allowed: false, scope: decision.scope, retryAfterSeconds: toSeconds(decision.retryAfterMs), quota }
    },
    // The connection state makes /readyz honest even when no request has tried Redis lately.
    status: () => (fallback && redis ? { store: 'redis', degraded: fallback.degraded || !redis.connected } : { store: 'memory', degraded: false }),
    close: () => store.close(),
  }
}

/** The scope list of every route scope, built once so a check allocates nothing for it. */
function compileScopeLists(config: Config['rateLimit']): Record<RateScope | 'none', readonly ScopeHit[]> {
  const hits = compileScopeHits(config)
  const globalOnly = Object.freeze([hits.global])
  return { ...mapScopes((scope) => (scope === 'global' ? globalOnly : Object.freeze([hits.global, hits[scope]]))), none: globalOnly }
}

function disabledLimiter(): RateLimiter {
  return {
    check: () => Promise.resolve(ALLOWED),
    status: () => ({ store: 'disabled', degraded: false }),
    close: () => Promise.resolve(),
  }
}
