import type { AuditRecorder } from '../../audit/audit-log.js'
import type { ProxiesService } from '../../proxies/service.js'
import { changeEvent } from '../audit-context.js'
import type { AppRouter } from '../context.js'
import { currentPrincipal, requirePermission } from '../middleware/authenticate.js'
import { presentPage } from '../presenters/common.js'
import { presentProxy } from '../presenters/proxies.js'
import { ListProxiesQuery, ProxyBody } from '../schemas/proxies.js'
import { validator } from '../schemas/validate.js'
import type { BodyParsers } from './body-parsers.js'

const parseProxy = validator(ProxyBody)
const parseList = validator(ListProxiesQuery, { query: true })

/** Pre-configured proxies (management keys); they are invoked at `/proxy` with SVC-PROXY-KEY (see proxy.ts). */
export function proxiesRoutes(router: AppRouter, proxies: ProxiesService, audit: AuditRecorder, body: BodyParsers): void {
  router.post('/proxies', requirePermission('proxy:create'), body.json, async (ctx) => {
    const { proxy, key } = await proxies.createProxy(currentPrincipal(ctx.state), parseProxy(ctx.state.body))
    await audit.record([changeEvent(ctx, 'proxy.create', 'proxy', proxy.id, 201)])
    ctx.status = 201
    ctx.body = presentProxy(proxy, key)
  })

  router.get('/proxies', requirePermission('proxy:read'), async (ctx) => {
    const q = parseList({ ...ctx.query })
    const page = await proxies.listProxies(currentPrincipal(ctx.state).tenantId, q.page, q.size)
    ctx.body = presentPage(page.items, page.total, q.page, q.size, (p) => presentProxy(p))
  })

  router.get('/proxies/:id', requirePermission('proxy:read'), async (ctx) => {
    ctx.body = presentProxy(await proxies.getProxy(currentPrincipal(ctx.state).tenantId, ctx.params.id!))
  })

  router.put('/proxies/:id', requirePermission('proxy:update'), body.json, async (ctx) => {
    const proxy = await proxies.updateProxy(currentPrincipal(ctx.state), ctx.params.id!, parseProxy(ctx.state.body))
    await audit.record([changeEvent(ctx, 'proxy.update', 'proxy', proxy.id, 200)])
    ctx.body = presentProxy(proxy)
  })

  router.delete('/proxies/:id', requirePermission('proxy:delete'), async (ctx) => {
    await proxies.deleteProxy(currentPrincipal(ctx.state), ctx.params.id!)
    await audit.record([changeEvent(ctx, 'proxy.delete', 'proxy', ctx.params.id!, 204)])
    ctx.status = 204
  })
}
