/** What @koa/router leaves on the context: the layers whose path matched, and the running one's pattern. */
interface RoutedContext {
  method: string
  path: string
  matched?: unknown
  _matchedRoute?: unknown
}

interface Layer {
  path: unknown
  methods: readonly string[]
}

/** Every path under `/proxy` is one route: the proxy middleware answers it before the routers. */
export const PROXY_ROUTE = '/proxy'

/**
 * The route template a request is for (`/tokens/:id`), never the path the caller sent, or
 * undefined when no route takes it. `_matchedRoute` alone is not enough: while a router-level
 * middleware runs (authentication, idempotency) it holds that middleware's own pattern, so a
 * request refused there (401, 409) would have no route. Then the route is the first layer
 * matching path and method, the one that would have answered.
 */
export function matchedRoute(ctx: RoutedContext): string | undefined {
  const layers = Array.isArray(ctx.matched) ? (ctx.matched as Layer[]) : []
  const current = ctx._matchedRoute
  if (typeof current === 'string' && layers.some((l) => l.path === current && l.methods.length > 0)) return current
  const route = layers.find((l) => l.methods.includes(ctx.method))?.path
  if (typeof route === 'string') return route
  return ctx.path === PROXY_ROUTE || ctx.path.startsWith(`${PROXY_ROUTE}/`) ? PROXY_ROUTE : undefined
}
