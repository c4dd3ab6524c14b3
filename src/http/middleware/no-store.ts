import type { Middleware } from 'koa'
import type { AppState } from '../context.js'

/**
 * Answers carry token data, API keys and session keys: no cache between the caller and us (a
 * browser's, a corporate proxy's) may keep them. A route that is safe to cache says so itself
 * (the docs page), and a proxied answer keeps the destination's own Cache-Control if it sent one.
 */
export function noStore(): Middleware<AppState> {
  return async (ctx, next) => {
    ctx.set('Cache-Control', 'no-store')
    await next()
  }
}
