import type { Middleware } from 'koa'
import type { Config } from '../../config/index.js'
import { AppError } from '../../errors/index.js'
import { createClientIpResolver, type RateLimiter } from '../../ratelimit/index.js'

/**
 * Counts the request before anything else runs (authentication, body parsing), so a flood
 * costs one limiter call per request. Every answer carries RateLimit-Limit, -Remaining and
 * -Reset of the request's tightest scope (set now, so problems and proxied answers carry them
 * too); a denied one is AppError('rate_limited') with Retry-After in whole seconds.
 */
export function rateLimitMiddleware(limiter: RateLimiter, config: Config): Middleware {
  if (!config.rateLimit.enabled) return (_ctx, next) => next()
  const resolveClientIp = createClientIpResolver(config.rateLimit.trustedProxies, config.rateLimit.ipv6PrefixLength)
  return async (ctx, next) => {
    const ip = resolveClientIp(ctx.req.socket.remoteAddress, ctx.get('X-Forwarded-For') || undefined)
    const decision = await limiter.check(ip, ctx.method, ctx.path)
    if (decision.quota) {
      ctx.set('RateLimit-Limit', String(decision.quota.limit))
      ctx.set('RateLimit-Remaining', String(decision.quota.remaining))
      ctx.set('RateLimit-Reset', String(decision.quota.resetSeconds))
    }
    if (!decision.allowed) {
      const retryAfter = String(decision.retryAfterSeconds)
      throw new AppError('rate_limited', {
        detail: `Rate limit exceeded (${decision.scope}); retry after ${retryAfter} s.`,
        headers: { 'Retry-After': retryAfter },
      })
    }
    await next()
  }
}
