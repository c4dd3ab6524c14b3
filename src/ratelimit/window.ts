import type { Decision, Quota, ScopeHit, ScopeUsage } from './types.js'

/** Per IP and scope: a fixed window that opens with its first request, and a block after it overflows. */
export interface WindowState {
  count: number
  windowEndsAt: number
  blockedUntil: number
}

/**
 * Counts one request at `now` and returns the milliseconds the scope stays blocked (0: allowed).
 * The Lua script in stores/redis.ts implements the same rules; keep the two in step.
 * A blocked request is not counted, and the overflowing request drops the window, so the IP
 * starts a fresh window once the block ends.
 */
export function applyHit(state: WindowState, rule: ScopeHit, now: number): number {
  if (state.blockedUntil > now) return state.blockedUntil - now
  if (state.windowEndsAt <= now) {
    state.count = 0
    state.windowEndsAt = now + rule.windowMs
  }
  state.count += 1
  if (state.count <= rule.limit) return 0
  state.count = 0
  state.windowEndsAt = 0
  state.blockedUntil = now + rule.blockMs
  return rule.blockMs
}

/** The usage applyHit left in `state` at `now`, for the RateLimit-* headers. */
export function usageOf(state: WindowState, blockedMs: number, now: number): ScopeUsage {
  return { blockedMs, count: state.count, resetMs: blockedMs > 0 ? blockedMs : Math.max(0, state.windowEndsAt - now) }
}

/**
 * Denies when any scope is blocked, naming the one that blocks longest. The quota is the scope
 * with the fewest requests left (a denied request: the blocking scope, none left).
 */
export function decide(scopes: readonly ScopeHit[], usage: readonly ScopeUsage[]): Decision {
  let worst = -1
  let tightest: Quota | undefined
  for (let i = 0; i < scopes.length; i++) {
    const u = usage[i] ?? { blockedMs: 0, count: 0, resetMs: 0 }
    if (u.blockedMs > 0 && (worst < 0 || u.blockedMs > (usage[worst]?.blockedMs ?? 0))) worst = i
    const limit = scopes[i]!.limit
    const remaining = Math.max(0, limit - u.count)
    if (!tightest || remaining < tightest.remaining || (remaining === tightest.remaining && u.resetMs > tightest.resetMs)) {
      tightest = { limit, remaining, resetMs: u.resetMs }
    }
  }
  const scope = scopes[worst]
  const quota = tightest ?? { limit: 0, remaining: 0, resetMs: 0 }
  if (!scope) return { allowed: true, quota }
  const retryAfterMs = usage[worst]?.blockedMs ?? 0
  return { allowed: false, scope: scope.scope, retryAfterMs, quota: { limit: scope.limit, remaining: 0, resetMs: retryAfterMs } }
}
