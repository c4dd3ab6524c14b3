import type { AuditRecorder } from '../../audit/audit-log.js'
import type { ApplicationKeysService } from '../../applications/keys-service.js'
import { changeEvent } from '../audit-context.js'
import type { AppRouter } from '../context.js'
import { currentPrincipal, requirePermission } from '../middleware/authenticate.js'
import { presentApplicationKey } from '../presenters/application-keys.js'

/** Minting and deleting a key need what regenerate needs; reading key metadata what reading the Application needs. */
export function applicationKeysRoutes(router: AppRouter, service: ApplicationKeysService, audit: AuditRecorder): void {
  router.post('/applications/:id/keys', requirePermission('application:update'), async (ctx) => {
    const { record, key } = await service.createKey(currentPrincipal(ctx.state), ctx.params.id!)
    await audit.record([changeEvent(ctx, 'application.key_create', 'application', record.application_id, 201)])
    ctx.status = 201
    ctx.body = presentApplicationKey(record, key)
  })

  router.get('/applications/:id/keys', requirePermission('application:read'), async (ctx) => {
    const keys = await service.listKeys(currentPrincipal(ctx.state).tenantId, ctx.params.id!)
    ctx.body = keys.map((k) => presentApplicationKey(k))
  })

  router.get('/applications/:id/keys/:keyId', requirePermission('application:read'), async (ctx) => {
    ctx.body = presentApplicationKey(await service.getKey(currentPrincipal(ctx.state).tenantId, ctx.params.id!, ctx.params.keyId!))
  })

  router.delete('/applications/:id/keys/:keyId', requirePermission('application:update'), async (ctx) => {
    await service.deleteKey(currentPrincipal(ctx.state), ctx.params.id!, ctx.params.keyId!)
    await audit.record([changeEvent(ctx, 'application.key_delete', 'application', ctx.params.id!, 204)])
    ctx.status = 204
  })
}
