import type { AuditRecorder } from '../../audit/audit-log.js'
import type { ApplicationsService } from '../../applications/service.js'
import { changeEvent } from '../audit-context.js'
import type { AppRouter } from '../context.js'
import { currentPrincipal, requirePermission } from '../middleware/authenticate.js'
import { presentApplication } from '../presenters/applications.js'
import { CreateApplicationBody, ListApplicationsQuery, UpdateApplicationBody } from '../schemas/applications.js'
import { validator } from '../schemas/validate.js'
import type { BodyParsers } from './body-parsers.js'
import { resourceRoutes } from './resource-routes.js'

const parseCreate = validator(CreateApplicationBody)
const parseUpdate = validator(UpdateApplicationBody)
const parseList = validator(ListApplicationsQuery, { query: true })

export function applicationsRoutes(router: AppRouter, service: ApplicationsService, audit: AuditRecorder, body: BodyParsers): void {
  // Registered before '/applications/:id' so 'key' is never taken for an id.
  router.get('/applications/key', requirePermission('application:read'), async (ctx) => {
    const principal = currentPrincipal(ctx.state)
    ctx.body = presentApplication(await service.getApplication(principal.tenantId, principal.id))
  })

  resourceRoutes(router, audit, body, {
    type: 'application',
    path: '/applications',
    parseCreate,
    parseUpdate,
    parseList,
    present: presentApplication,
    async create(caller, input) {
      const { application, key } = await service.createApplication(caller, input)
      return { record: application, key }
    },
    list: (tenantId, q) => service.listApplications(tenantId, { ids: q.id, types: q.type }, q.page, q.size),
    get: service.getApplication,
    update: service.updateApplication,
    delete: service.deleteApplication,
  })

  router.post('/applications/:id/regenerate', requirePermission('application:update'), async (ctx) => {
    const { application, key } = await service.regenerateKey(currentPrincipal(ctx.state), ctx.params.id!)
    await audit.record([changeEvent(ctx, 'application.regenerate_key', 'application', application.id, 200)])
    ctx.body = presentApplication(application, key)
  })
}
