import type { ApplicationKeysService } from '../../applications/keys-service.js'
import type { AppRouter } from '../context.js'
import { currentPrincipal, requirePermission } from '../middleware/authenticate.js'
import { presentApplicationKey } from '../presenters/application-keys.js'

/** Minting and deleting a key need what regenerate needs; reading key metadata what reading the Application needs. */
export function applicationKeysRoutes(router: AppRouter, service: ApplicationKeysService): void {
  router.post('/applications/:id/keys', requirePermission('application:update'), async (ctx) => {
    const { record, key } = await service.createKey(currentPrincipal(ctx.state), ctx.params.id!)
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
    ctx.status = 204
  })
}
