import type { AuditRecorder } from '../../audit/audit-log.js'
import type { ApplicationsService } from '../../applications/service.js'
import { changeEvent } from '../audit-context.js'
import type { AppRouter } from '../context.js'
import { currentPrincipal, requirePermission } from '../middleware/authenticate.js'
import { presentApplication } from '../presenters/applications.js'
import { presentPage } from '../presenters/common.js'
import { CreateApplicationBody, ListApplicationsQuery, UpdateApplicationBody } from '../schemas/applications.js'
import { validator } from '../schemas/validate.js'
import type { BodyParsers } from './body-parsers.js'

const parseCreate = validator(CreateApplicationBody)
const parseUpdate = validator(UpdateApplicationBody)
const parseList = validator(ListApplicationsQuery, { query: true })

export function applicationsRoutes(router: AppRouter, service: ApplicationsService, audit: AuditRecorder, body: BodyParsers): void {
  router.post('/applications', requirePermission('application:create'), body.json, async (ctx) => {
    const { application, key } = await service.createApplication(currentPrincipal(ctx.state), parseCreate(ctx.state.body))
    await audit.record([changeEvent(ctx, 'application.create', 'application', application.id, 201)])
    ctx.status = 201
    ctx.body = presentApplication(application, key)
  })

  router.get('/applications', requirePermission('application:read'), async (ctx) => {
    const q = parseList({ ...ctx.query })
    const { items, total } = await service.listApplications(currentPrincipal(ctx.state).tenantId, { ids: q.id, types: q.type }, q.page, q.size)
    ctx.body = presentPage(items, total, q.page, q.size, (a) => presentApplication(a))
  })

  // Registered before '/applications/:id' so 'key' is never taken for an id.
  router.get('/applications/key', requirePermission('application:read'), async (ctx) => {
    const principal = currentPrincipal(ctx.state)
    ctx.body = presentApplication(await service.getApplication(principal.tenantId, principal.id))
  })

  router.get('/applications/:id', requirePermission('application:read'), async (ctx) => {
    ctx.body = presentApplication(await service.getApplication(currentPrincipal(ctx.state).tenantId, ctx.params.id!))
  })

  router.put('/applications/:id', requirePermission('application:update'), body.json, async (ctx) => {
    const application = await service.updateApplication(currentPrincipal(ctx.state), ctx.params.id!, parseUpdate(ctx.state.body))
    await audit.record([changeEvent(ctx, 'application.update', 'application', application.id, 200)])
    ctx.body = presentApplication(application)
  })

  router.post('/applications/:id/regenerate', requirePermission('application:update'), async (ctx) => {
    const { application, key } = await service.regenerateKey(currentPrincipal(ctx.state), ctx.params.id!)
    await audit.record([changeEvent(ctx, 'application.regenerate_key', 'application', application.id, 200)])
    ctx.body = presentApplication(application, key)
  })

  router.delete('/applications/:id', requirePermission('application:delete'), async (ctx) => {
    await service.deleteApplication(currentPrincipal(ctx.state), ctx.params.id!)
    await audit.record([changeEvent(ctx, 'application.delete', 'application', ctx.params.id!, 204)])
    ctx.status = 204
  })
}
