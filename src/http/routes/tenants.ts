import { timingSafeEqual } from 'node:crypto'
import type { Middleware } from 'koa'
import type { AuditRecorder } from '../../audit/audit-log.js'
import { AppError } from '../../errors/index.js'
import type { TenantsService } from '../../tenants/service.js'
import { auditEvent, changeEvent } from '../audit-context.js'
import type { AppRouter, AppState } from '../context.js'
import { currentPrincipal, requirePermission } from '../middleware/authenticate.js'
import { presentApplication } from '../presenters/applications.js'
import { presentTenant } from '../presenters/tenants.js'
import { CreateTenantBody, UpdateTenantBody } from '../schemas/tenants.js'
import { validator } from '../schemas/validate.js'
import type { BodyParsers } from './body-parsers.js'

const parseCreate = validator(CreateTenantBody)
const parseUpdate = validator(UpdateTenantBody)

/** `POST /tenants`, authorized by the operator key rather than an Application key. */
export function operatorRoutes(router: AppRouter, service: TenantsService, audit: AuditRecorder, operatorKey: string | undefined, body: BodyParsers): void {
  router.post('/tenants', requireOperator(operatorKey), body.json, async (ctx) => {
    // The events' tenant and actor (the operator) win over the request's: they open the new tenant's chain.
    // Written in the tenant's own transaction: unrecorded, no tenant stands and the caller gets 503.
    const created = await service.createRecordedTenant(parseCreate(ctx.state.body).name, undefined, (trx, events) => audit.recordIn(trx, events.map((event) => auditEvent(ctx, event))))
    ctx.status = 201
    ctx.body = { tenant: presentTenant(created.tenant), application: presentApplication(created.application, created.key) }
  })
}

export function tenantRoutes(router: AppRouter, service: TenantsService, audit: AuditRecorder, body: BodyParsers): void {
  router.get('/tenants/self', requirePermission('tenant:read'), async (ctx) => {
    ctx.body = presentTenant(await service.getTenant(currentPrincipal(ctx.state).tenantId))
  })

  router.patch('/tenants/self', requirePermission('tenant:update'), body.mergePatch, async (ctx) => {
    const { settings } = parseUpdate(ctx.state.body)
    const tenant = await service.updateSettings(currentPrincipal(ctx.state).tenantId, settings)
    await audit.record([changeEvent(ctx, 'tenant.update', 'tenant', tenant.id, 200)])
    ctx.body = presentTenant(tenant)
  })
}

/** The operator key in SVC-API-KEY (compared in constant time); without SVC_OPERATOR_KEY the route is 404. */
export function requireOperator(operatorKey: string | undefined): Middleware<AppState> {
  const expected = operatorKey ? Buffer.from(operatorKey) : undefined
  return async (ctx, next) => {
    // Without SVC_OPERATOR_KEY the route does not exist.
    if (!expected) throw new AppError('not_found', { detail: 'No route matches this path.' })
    const given = Buffer.from(ctx.get('svc-api-key'))
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      throw new AppError('unauthenticated', { detail: 'The operator key is not valid.' })
    }
    await next()
  }
}
