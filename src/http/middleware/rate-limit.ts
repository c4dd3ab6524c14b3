import type { Middleware } from 'koa'
import type { Config } from '../../config/index.js'
import { AppError } from '../../errors/index.js'
import { createClientIpResolver, type RateLimiter } from '../../ratelimit/index.js'

/**
 * Counts the request before anything else runs (authentication, body parsing), so a flood
 * costs one limiter call per request. Throws AppError('rate_limited') for the error handler
 * to render, with Retry-After in whole seconds.
 */
export function rateLimitMiddleware(limiter: RateLimiter, config: Config): Middleware {
  if (!config.rateLimit.enabled) return (_ctx, next) => next()
  const resolveClientIp = createClientIpResolver(config.rateLimit.trustedProxies)
  return async (ctx, next) => {
    const ip = resolveClientIp(ctx.req.socket.remoteAddress, ctx.get('X-Forwarded-For') || undefined)
    const decision = await limiter.check(ip, ctx.method, ctx.path)
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
