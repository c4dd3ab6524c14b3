import type { Decision, RateLimitStore, ScopeHit } from '../types.js'
import { applyHit, decide, usageOf, type WindowState } from '../window.js'

export interface MemoryStoreOptions {
  /** Milliseconds clock; tests inject one to step through windows and blocks. */
  now?: () => number
  /** How often expired windows are dropped, so memory follows the active IPs only. */
  sweepIntervalMs?: number
}

/** In-process windows: used when REDIS_URL is unset and as the fallback while Redis is down. */
export class MemoryStore implements RateLimitStore {
  private readonly states = new Map<string, WindowState>()
  private readonly now: () => number
  private readonly sweepIntervalMs: number
  private nextSweepAt: number

  constructor(options: MemoryStoreOptions = {}) {
    this.now = options.now ?? Date.now
    this.sweepIntervalMs = options.sweepIntervalMs ?? 10_000
    this.nextSweepAt = this.now() + this.sweepIntervalMs
  }

  hit(ip: string, scopes: readonly ScopeHit[]): Promise<Decision> {
    return Promise.resolve(this.hitNow(ip, scopes))
  }

  /** Synchronous form of hit(), for callers that cannot await. */
  hitNow(ip: string, scopes: readonly ScopeHit[]): Decision {
    const now = this.now()
    if (now >= this.nextSweepAt) this.sweep(now)
    const usage = scopes.map((rule) => {
      const state = this.stateOf(`${rule.scope} ${ip}`)
      return usageOf(state, applyHit(state, rule, now), now)
    })
    return decide(scopes, usage)
  }

  /** Number of tracked (scope, IP) pairs. */
  get size(): number {
    return this.states.size
  }

  close(): Promise<void> {
    this.states.clear()
    return Promise.resolve()
  }

  private stateOf(key: string): WindowState {
    let state = this.states.get(key)
    if (!state) {
      state = { count: 0, windowEndsAt: 0, blockedUntil: 0 }
      this.states.set(key, state)
    }
    return state
  }

  private sweep(now: number): void {
    this.nextSweepAt = now + this.sweepIntervalMs
    for (const [key, state] of this.states) {
      if (state.windowEndsAt <= now && state.blockedUntil <= now) this.states.delete(key)
    }
  }
}
