import { Router } from '@koa/router'
import Koa from 'koa'
import { AppError } from './errors/index.js'
import type { AppState } from './http/context.js'
import { accessLog } from './http/middleware/access-log.js'
import { auditRequests } from './http/middleware/audit.js'
import { authenticate } from './http/middleware/authenticate.js'
import { cors } from './http/middleware/cors.js'
import { errorHandler } from './http/middleware/error-handler.js'
import { idempotency } from './http/middleware/idempotency.js'
import { noStore } from './http/middleware/no-store.js'
import { rateLimitMiddleware } from './http/middleware/rate-limit.js'
import { requestId } from './http/middleware/request-id.js'
import { textGuard } from './http/middleware/text-guard.js'
import { applicationsRoutes } from './http/routes/applications.js'
import { applicationKeysRoutes } from './http/routes/application-keys.js'
import { bodyParsers } from './http/routes/body-parsers.js'
import { docsRoutes } from './http/routes/docs.js'
import { healthRoutes, singleFlight } from './http/routes/health.js'
import { BodyBudget } from './http/body-budget.js'
import { Drain } from './http/drain.js'
import { httpMetrics } from './metrics/http-metrics.js'
import { logsRoutes } from './http/routes/logs.js'
import { permissionsRoutes } from './http/routes/permissions.js'
import { proxiesRoutes } from './http/routes/proxies.js'
import { reactorRoutes } from './http/routes/reactors.js'
import { sessionRoutes } from './http/routes/sessions.js'
import { tokenRoutes } from './http/routes/tokens.js'
import { tokenV2Routes } from './http/routes/tokens-v2.js'
import { proxyRoute } from './http/routes/proxy.js'
import { operatorRoutes, tenantRoutes } from './http/routes/tenants.js'
import { metricsRoute } from './http/routes/metrics.js'
import type { Services } from './services.js'

/**
 * The HTTP application. Every request flows one way:
 * request id -> errors -> rate limit -> authenticate -> authorize -> validate -> domain -> presenter.
 * It never listens; `main.ts` and the tests do.
 */
export function buildApp(services: Services, drain = new Drain(), bodyBudget = new BodyBudget(services.config.bodyBytesInFlight)): Koa<AppState> {
  const { config, logger } = services
  const app = new Koa<AppState>({ proxy: false })
  app.silent = true

  app.use(requestId())
  app.use(noStore())
  app.use(httpMetrics(services.metrics))
  app.use(accessLog(logger, drain))
  app.use(errorHandler(logger))
  // Inside the error handler, so problems carry its headers; a preflight ends here.
  app.use(cors(config.cors.origins))
  app.use(auditRequests(services.audit, config.rateLimit.trustedProxies))
  // Before authentication and body parsing, so a flood costs as little as possible.
  app.use(rateLimitMiddleware(services.limiter, config))
  // Claims /proxy before the routers, so none of them can answer it without `proxy_error`.
  app.use(proxyRoute({ authenticator: services.authenticator, proxy: services.proxy, proxies: services.proxies, tenantSettings: services.tenantSettings, bodyLimitBytes: config.bodyLimitBytes, bodyMaxJsonValues: config.bodyMaxJsonValues, bodyBudget, audit: services.audit, clock: services.clock }))
  app.use(textGuard())
  for (const router of buildRouters(services, drain, bodyBudget)) {
    app.use(router.routes())
    app.use(allowedMethods(router))
  }
  return app
}

/** The router's 405 as problem+json, with the `Allow` header RFC 9110 asks of it: the methods of the routes that match the path. */
function allowedMethods(router: Router<AppState>): ReturnType<Router<AppState>['allowedMethods']> {
  const refuse = () => new AppError('method_not_allowed')
  const inner = router.allowedMethods({ throw: true, methodNotAllowed: refuse, notImplemented: refuse })
  return async (ctx, next) => {
    try {
      await inner(ctx, next)
    } catch (err) {
      if (!(err instanceof AppError) || err.code !== 'method_not_allowed' || err.headers?.Allow !== undefined) throw err
      const allow = [...new Set(router.match(ctx.path, ctx.method).path.flatMap((layer) => layer.methods))]
      if (allow.length === 0) throw err
      throw new AppError('method_not_allowed', { headers: { Allow: allow.join(', ') } })
    }
  }
}

/** The routers behind `/proxy`: the open one (no key) and the API (SVC-API-KEY). The API description is checked against them. */
export function buildRouters(services: Services, drain = new Drain(), bodyBudget = new BodyBudget(services.config.bodyBytesInFlight)): Router<AppState>[] {
  const { config, logger } = services
  const body = bodyParsers({ bodyBytes: config.bodyLimitBytes, payloadBytes: config.reactors.payloadMaxBytes, jsonValues: config.bodyMaxJsonValues, budget: bodyBudget }, services.authenticator)

  const open = new Router<AppState>()
  const pingDatabase = singleFlight(() => services.store.db.ping())
  healthRoutes(open, [
    { name: 'serving', check: async () => { if (drain.draining) throw new Error('shutting down'); return 'ok' } },
    { name: 'database', check: async () => (await pingDatabase(), 'ok') },
    { name: 'vault', check: async () => { if (!services.keys.ready) throw new Error(services.keys.reason); return 'ok' } },
    { name: 'rate_limit', check: async () => (services.limiter.status().degraded ? 'degraded' : 'ok') },
    // Only a write clears `failing`: were it `down`, an instance a load balancer took out of
    // rotation would never be sent the write that shows it can write again (after a database
    // outage, it stayed out for good). While the database answers it is `degraded`: requests
    // that need an entry try again and answer 503 if it still cannot be written.
    { name: 'audit', check: async () => (services.audit.stats().failing ? (await pingDatabase(), 'degraded') : 'ok') },
  ], config.readyTimeoutMs)
  operatorRoutes(open, services.tenants, services.audit, config.operatorKey, body)
  if (config.metrics.mode === 'operator') metricsRoute(open, services.metrics, config.operatorKey)
  docsRoutes(open, { metrics: config.metrics.mode === 'operator' })

  const api = new Router<AppState>()
  api.use(authenticate(services.authenticator))
  // The react route takes larger bodies than the rest; its own parser still applies its limit.
  api.use(idempotency(services.idempotency, Math.max(config.bodyLimitBytes, config.reactors.payloadMaxBytes), bodyBudget, logger, services.authenticator))
  applicationsRoutes(api, services.applications, services.audit, body)
  applicationKeysRoutes(api, services.applicationKeys, services.audit)
  tenantRoutes(api, services.tenants, services.audit, body)
  permissionsRoutes(api)
  tokenRoutes(api, { store: services.store, keys: services.keys, tokens: services.tokens }, services.audit, body, config.expressions.maxTokens)
  tokenV2Routes(api, services.tokens, services.audit, body)
  sessionRoutes(api, services.sessions, services.audit, body)
  reactorRoutes(api, services.reactors, services.audit, body)
  proxiesRoutes(api, services.proxies, services.audit, body)
  logsRoutes(api, services.audit)
  return [open, api]
}
