import type { RateScope } from '../config/index.js'

/** One scope a request counts in, with its rule in milliseconds. */
export interface ScopeHit {
  scope: RateScope
  limit: number
  windowMs: number
  blockMs: number
}

/** What the RateLimit-* headers report: the scope of the request closest to its limit. */
export interface Quota {
  limit: number
  remaining: number
  /** Milliseconds until that scope's window (or block) ends. */
  resetMs: number
}

/** One scope's state after a hit: blocked for `blockedMs` (0: allowed), `count` requests in a window ending in `resetMs`. */
export interface ScopeUsage {
  blockedMs: number
  count: number
  resetMs: number
}

export type Decision = ({ allowed: true } | { allowed: false; scope: RateScope; retryAfterMs: number }) & { quota: Quota }

/**
 * Counts one request of `ip` in every scope of `scopes` at once. A store must count every scope
 * even when one of them denies, so each scope behaves as an independent limiter.
 */
export interface RateLimitStore {
  hit(ip: string, scopes: readonly ScopeHit[]): Promise<Decision>
  close(): Promise<void>
}

/** The slice of a pino logger the limiter uses; tests pass a recorder. */
export interface RateLimitLogger {
  warn(obj: object, msg: string): void
  info(obj: object, msg: string): void
}
