import type { Decision, ScopeHit } from './types.js'

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

/** Denies when any scope is blocked, naming the one that blocks longest. */
export function decide(scopes: readonly ScopeHit[], blockedMs: readonly number[]): Decision {
  let worst = -1
  for (let i = 0; i < scopes.length; i++) {
    const ms = blockedMs[i] ?? 0
    if (ms > 0 && (worst < 0 || ms > (blockedMs[worst] ?? 0))) worst = i
  }
  const scope = scopes[worst]
  if (!scope) return { allowed: true }
  return { allowed: false, scope: scope.scope, retryAfterMs: blockedMs[worst] ?? 0 }
}
