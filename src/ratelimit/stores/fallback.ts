import type { Decision, RateLimitLogger, RateLimitStore, ScopeHit } from '../types.js'
import type { MemoryStore } from './memory.js'

export interface FallbackStoreOptions {
  /** While degraded, at most one request per interval tries the primary again. */
  probeIntervalMs?: number
  now?: () => number
}

/**
 * The primary (Redis) store with an in-process fallback. A failed or timed-out call switches
 * to degraded: requests are counted in memory with the same limits, a warning is logged once,
 * and only one request per probe interval pays the primary's time-out again, so a frozen Redis
 * doesn't add its time-out to every request. The first probe that succeeds ends the outage.
 */
export class FallbackStore implements RateLimitStore {
  private readonly probeIntervalMs: number
  private readonly now: () => number
  private isDegraded = false
  private nextProbeAt = 0

  constructor(
    private readonly primary: RateLimitStore,
    private readonly fallback: MemoryStore,
    private readonly logger: RateLimitLogger,
    options: FallbackStoreOptions = {},
  ) {
    this.probeIntervalMs = options.probeIntervalMs ?? 1000
    this.now = options.now ?? Date.now
  }

  get degraded(): boolean {
    return this.isDegraded
  }

  async hit(ip: string, scopes: readonly ScopeHit[]): Promise<Decision> {
    if (this.isDegraded) {
      if (this.now() < this.nextProbeAt) return this.fallback.hitNow(ip, scopes)
      // Claim the probe before awaiting, so concurrent requests don't all probe at once.
      this.nextProbeAt = this.now() + this.probeIntervalMs
    }
    try {
      const decision = await this.primary.hit(ip, scopes)
      if (this.isDegraded) {
        this.isDegraded = false
        this.logger.info({}, 'rate limiter: Redis is back, limits are shared again')
      }
      return decision
    } catch (err) {
      this.markDegraded(err)
      return this.fallback.hitNow(ip, scopes)
    }
  }

  async close(): Promise<void> {
    await Promise.all([this.primary.close(), this.fallback.close()])
  }

  private markDegraded(err: unknown): void {
    this.nextProbeAt = this.now() + this.probeIntervalMs
    if (this.isDegraded) return
    this.isDegraded = true
    const message = err instanceof Error ? err.message : String(err)
    this.logger.warn({ err: message }, 'rate limiter: Redis unavailable, counting in process until it returns')
  }
}
