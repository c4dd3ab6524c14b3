import type { Middleware } from 'koa'
import { matchedRoute, PROXY_ROUTE } from '../http/matched-route.js'
import type { Metrics } from './metrics.js'

/**
 * Counts and times every answer by its route template (`/tokens/:id`), never the raw path, so
 * token ids and other caller-chosen values never become labels. `/proxy/<path>` counts as one
 * route; paths no route matched as `unmatched`.
 */
export function httpMetrics(metrics: Metrics): Middleware {
  return async (ctx, next) => {
    const end = metrics.httpDuration.startTimer()
    try {
      await next()
    } finally {
      const labels = { route: routeOf(ctx), method: methodOf(ctx.method), status: String(ctx.status) }
      end(labels)
      metrics.httpRequests.inc(labels)
    }
  }
}

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'])
const methodOf = (method: string) => (METHODS.has(method) ? method : 'OTHER')

function routeOf(ctx: Parameters<typeof matchedRoute>[0]): string {
  const route = matchedRoute(ctx)
  if (route === PROXY_ROUTE) return '/proxy/*'
  return route ?? 'unmatched'
}
