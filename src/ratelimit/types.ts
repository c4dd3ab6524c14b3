import type { RateScope } from '../config/index.js'

/** One scope a request counts in, with its rule in milliseconds. */
export interface ScopeHit {
  scope: RateScope
  limit: number
  windowMs: number
  blockMs: number
}

export type Decision = { allowed: true } | { allowed: false; scope: RateScope; retryAfterMs: number }

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
