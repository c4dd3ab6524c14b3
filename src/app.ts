import { Router } from '@koa/router'
import Koa from 'koa'
import { AppError } from './errors/index.js'
import type { AppState } from './http/context.js'
import { accessLog } from './http/middleware/access-log.js'
import { authenticate } from './http/middleware/authenticate.js'
import { errorHandler } from './http/middleware/error-handler.js'
import { rateLimitMiddleware } from './http/middleware/rate-limit.js'
import { requestId } from './http/middleware/request-id.js'
import { applicationsRoutes } from './http/routes/applications.js'
import { bodyParsers } from './http/routes/body-parsers.js'
import { healthRoutes } from './http/routes/health.js'
import { permissionsRoutes } from './http/routes/permissions.js'
import { proxiesRoutes } from './http/routes/proxies.js'
import { reactorRoutes } from './http/routes/reactors.js'
import { sessionRoutes } from './http/routes/sessions.js'
import { tokenRoutes } from './http/routes/tokens.js'
import { proxyRoute } from './http/routes/proxy.js'
import { operatorRoutes, tenantRoutes } from './http/routes/tenants.js'
import type { Services } from './services.js'

/**
 * The HTTP application. Every request flows one way:
 * request id -> errors -> rate limit -> authenticate -> authorize -> validate -> domain -> presenter.
 * It never listens; `main.ts` and the tests do.
 */
export function buildApp(services: Services): Koa<AppState> {
  const { config, logger } = services
  const app = new Koa<AppState>({ proxy: false })
  app.silent = true
  const body = bodyParsers(config.bodyLimitBytes)

  const open = new Router<AppState>()
  healthRoutes(open, [
    { name: 'database', check: async () => (await services.store.db.ping(), 'ok') },
    { name: 'vault', check: async () => { if (!services.keys.ready) throw new Error(services.keys.reason); return 'ok' } },
    { name: 'rate_limit', check: async () => (services.limiter.status().degraded ? 'degraded' : 'ok') },
  ])
  operatorRoutes(open, services.tenants, config.operatorKey, body)

  const api = new Router<AppState>()
  api.use(authenticate(services.authenticator))
  applicationsRoutes(api, services.applications, body)
  tenantRoutes(api, services.tenants, body)
  permissionsRoutes(api)
  tokenRoutes(api, services, body)
  sessionRoutes(api, services.sessions, body)
  reactorRoutes(api, services.reactors, body, config.reactors.payloadMaxBytes)
  proxiesRoutes(api, services.proxies, body)

  app.use(requestId())
  app.use(accessLog(logger))
  app.use(errorHandler(logger))
  // Before authentication and body parsing, so a flood costs as little as possible.
  app.use(rateLimitMiddleware(services.limiter, config))
  // Claims /proxy before the routers, so none of them can answer it without `proxy_error`.
  app.use(proxyRoute({ authenticator: services.authenticator, proxy: services.proxy, proxies: services.proxies, tenantSettings: services.tenantSettings, bodyLimitBytes: config.bodyLimitBytes }))
  for (const router of [open, api]) {
    app.use(router.routes())
    app.use(router.allowedMethods({ throw: true, methodNotAllowed: () => new AppError('method_not_allowed'), notImplemented: () => new AppError('method_not_allowed') }))
  }
  return app
}
