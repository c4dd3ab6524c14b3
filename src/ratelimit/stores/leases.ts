import type { Decision, RateLimitStore, ScopeHit, ScopeUsage } from '../types.js'
import { decide } from '../window.js'
import type { ScopeGrant } from './redis.js'

/** What the lease store needs of Redis: one round trip that counts and grants (RedisStore.take). */
export interface BudgetSource {
  take(ip: string, scopes: readonly ScopeHit[], wants: readonly number[], carried: readonly number[]): Promise<ScopeGrant[]>
  close(): Promise<void>
}

export interface LeaseStoreOptions {
  now?: () => number
  /** Longest a lease is used before Redis is asked again (default 250 ms). */
  leaseMs?: number
  /** Leases (IP and scope) kept at most; past it the oldest go (default 50,000). */
  maxLeases?: number
  /** Share of a limit leased at once (see leaseSize; default 1, 0: no leases). */
  percent?: number
}

/** Per IP and scope: units of the window's budget this process took from Redis and has not used yet, or a block. */
interface Lease {
  left: number
  /** Used until then: the earlier of the lease time and the window's end. */
  usableUntil: number
  limit: number
  /** The window's count in Redis when the lease was granted (units of other processes included). */
  countAtGrant: number
  windowEndsAt: number
  blockedUntil: number
}

/**
 * The units of a scope's budget one process takes from Redis at a time: `percent` of its limit
 * (default 1%), at least 1 and at most 100. Under 2 units (limits under 200 at 1%; every limit
 * at 0%) that is one unit, i.e. a Redis round trip per request, exact across processes.
 */
export function leaseSize(limit: number, percent = 1): number {
  return Math.max(1, Math.min(100, Math.floor((limit * percent) / 100)))
}

/**
 * Redis windows with local leases: instead of one round trip per request, a process takes a
 * few units of a scope's budget at once (leaseSize) and counts them down in memory, asking
 * Redis again when they run out, after `leaseMs`, or when the window ends, whichever is first.
 *
 * What stays exact: units are granted out of the window's budget in Redis, never beyond it, so
 * no more requests than the limit pass in a window across all processes; a lease never outlives
 * its window; and in a single process the request refused is exactly the first one over the
 * limit. What it costs with several processes: units one process holds and has not used are
 * budget the others cannot use, so a client may be refused up to (processes - 1) x leaseSize
 * requests early (1% of the limit per other process); a block one process set reaches the
 * others when their lease ends (at most `leaseMs`). Limits under 200 lease one unit (and every
 * limit with SVC_RATE_LIMIT_LEASE_PERCENT=0): exact, a round trip per request. A block seen here
 * is remembered until it ends, so a client that keeps hammering a blocked scope costs no round
 * trip.
 */
export class LeaseStore implements RateLimitStore {
  private readonly leases = new Map<string, Lease>()
  /** Takes under way for leases of more than one unit, by IP and scope. */
  private readonly inFlight = new Map<string, Promise<void>>()
  private readonly now: () => number
  private readonly leaseMs: number
  private readonly maxLeases: number
  private readonly percent: number

  constructor(
    private readonly source: BudgetSource,
    options: LeaseStoreOptions = {},
  ) {
    this.now = options.now ?? Date.now
    this.leaseMs = options.leaseMs ?? 250
    this.maxLeases = options.maxLeases ?? 50_000
    this.percent = options.percent ?? 1
  }

  async hit(ip: string, scopes: readonly ScopeHit[]): Promise<Decision> {
    for (;;) {
      const now = this.now()
      const keys = scopes.map((rule) => `${rule.scope} ${ip}`)
      const ask: number[] = []
      for (let i = 0; i < scopes.length; i++) {
        const lease = this.leases.get(keys[i]!)
        if (lease === undefined || (lease.blockedUntil <= now && (lease.left <= 0 || lease.usableUntil <= now))) ask.push(i)
      }
      // Concurrent requests that ran out together wait for one lease instead of each taking one
      // (whose unused units would be lost budget); leases of one unit waste nothing.
      const flying = ask.map((i) => this.inFlight.get(keys[i]!)).find((p) => p !== undefined)
      if (flying !== undefined) {
        await flying
        continue
      }
      // The scopes with a usable lease count here now, as they would have.
      const usage: (ScopeUsage | undefined)[] = scopes.map((_, i) => (ask.includes(i) ? undefined : this.use(this.leases.get(keys[i]!)!, now)))
      if (ask.length === 0) return decide(scopes, usage as ScopeUsage[])
      const asked = ask.map((i) => scopes[i]!)
      const carried = ask.map((i) => this.carried(this.leases.get(keys[i]!), now))
      const taking = this.source.take(ip, asked, asked.map((rule) => leaseSize(rule.limit, this.percent)), carried)
      // Waiters share the take's failure: had they asked again one after another, each would have
      // waited out a frozen Redis's time-out in turn (the twentieth request of a burst 5 s).
      const settled = taking.then(() => undefined)
      settled.catch(() => undefined)
      for (const i of ask) if (leaseSize(scopes[i]!.limit, this.percent) > 1) this.inFlight.set(keys[i]!, settled)
      try {
        const grants = await taking
        ask.forEach((i, j) => (usage[i] = this.granted(keys[i]!, scopes[i]!, grants[j]!, grants[j]!.kept ? carried[j]! : 0, now)))
      } finally {
        for (const i of ask) if (this.inFlight.get(keys[i]!) === settled) this.inFlight.delete(keys[i]!)
      }
      return decide(scopes, usage as ScopeUsage[])
    }
  }

  async close(): Promise<void> {
    this.leases.clear()
    await this.source.close()
  }

  /** Counts one request on a lease (or a remembered block). */
  private use(lease: Lease, now: number): ScopeUsage {
    if (lease.blockedUntil > now) return { blockedMs: lease.blockedUntil - now, count: 0, resetMs: lease.blockedUntil - now }
    lease.left -= 1
    return { blockedMs: 0, count: lease.limit - this.remaining(lease), resetMs: Math.max(0, lease.windowEndsAt - now) }
  }

  /**
   * The unused units of a lease that is only out of time (`leaseMs`): counted in Redis already, they
   * are carried into the next take instead of being lost budget (a client slower than one request
   * per `leaseMs` would otherwise spend a whole lease per request). Only while the window they were
   * counted in surely lasts: this process's estimate of its end errs early (see `granted`).
   */
  private carried(lease: Lease | undefined, now: number): number {
    return lease !== undefined && lease.blockedUntil <= now && lease.left > 0 && lease.windowEndsAt > now ? lease.left : 0
  }

  /** The request was counted in Redis, which granted `grant.granted` units and kept `carried` (this request's one among them). */
  private granted(key: string, rule: ScopeHit, grant: ScopeGrant, carried: number, askedAt: number): ScopeUsage {
    // Times count from before the call: Redis read the window's time left after it left here.
    const lease: Lease = grant.blockedMs > 0
      ? { left: 0, usableUntil: 0, limit: rule.limit, countAtGrant: 0, windowEndsAt: 0, blockedUntil: askedAt + grant.blockedMs }
      : { left: carried + grant.granted - 1, usableUntil: askedAt + Math.min(this.leaseMs, grant.resetMs), limit: rule.limit, countAtGrant: grant.count, windowEndsAt: askedAt + grant.resetMs, blockedUntil: 0 }
    this.remember(key, lease)
    if (grant.blockedMs > 0) return grant
    return { blockedMs: 0, count: rule.limit - this.remaining(lease), resetMs: grant.resetMs }
  }

  /** What the window has left for this process: what Redis had not granted, plus this lease's unused units. */
  private remaining(lease: Lease): number {
    return Math.max(0, lease.limit - lease.countAtGrant) + Math.max(0, lease.left)
  }

  private remember(key: string, lease: Lease): void {
    this.leases.delete(key)
    this.leases.set(key, lease)
    if (this.leases.size <= this.maxLeases) return
    // Oldest first (Map order is insertion order, renewed above): ended leases and blocks go
    // first; past them, the oldest go even if usable, which only costs their owner a round trip.
    const now = this.now()
    for (const [k, l] of this.leases) {
      if (this.leases.size <= this.maxLeases * 0.9) break
      if (l.usableUntil <= now && l.blockedUntil <= now) this.leases.delete(k)
    }
    for (const k of this.leases.keys()) {
      if (this.leases.size <= this.maxLeases) break
      this.leases.delete(k)
    }
  }
}
