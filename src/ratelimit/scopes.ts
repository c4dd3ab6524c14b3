import { mapScopes, type Config, type RateScope } from '../config/index.js'
import type { ScopeHit } from './types.js'

/**
 * The route scope of a request, besides `global`. The path is compared the way the router
 * matches it (case-insensitive, trailing slash ignored, HEAD served by GET routes), so
 * `HEAD /Tokens/` cannot slip past the `tokens_list` limit.
 */
export function selectRouteScope(method: string, path: string): RateScope | undefined {
  const p = normalizePath(path)
  if (p === '/portal' || p.startsWith('/portal/')) return 'portal'
  const m = method.toUpperCase()
  if (m === 'POST') {
    if (p === '/tokens/search' || p === '/v2/tokens/search') return 'tokens_search'
    if (p === '/tokens' || p === '/tokenize') return 'tokens_create'
  }
  if ((m === 'GET' || m === 'HEAD') && (p === '/tokens' || p === '/v2/tokens')) return 'tokens_list'
  return undefined
}

function normalizePath(path: string): string {
  let p = path.toLowerCase()
  while (p.length > 1 && p.endsWith('/')) p = p.slice(0, -1)
  return p
}

type RateLimitConfig = Config['rateLimit']

/** Builds the ScopeHit list for every scope once, so the per-request path only picks entries. */
export function compileScopeHits(config: RateLimitConfig): Record<RateScope, ScopeHit> {
  const blockMs = config.blockSeconds * 1000
  const hit = (scope: RateScope): ScopeHit => {
    const rule = config.scopes[scope]
    return { scope, limit: rule.limit, windowMs: rule.windowSeconds * 1000, blockMs }
  }
  return mapScopes(hit)
}
