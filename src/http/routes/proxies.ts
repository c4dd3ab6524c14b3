import type { AuditRecorder } from '../../audit/audit-log.js'
import type { PreconfiguredProxiesService } from '../../proxies/service.js'
import type { AppRouter } from '../context.js'
import { presentProxy } from '../presenters/proxies.js'
import { ListProxiesQuery, ProxyBody } from '../schemas/proxies.js'
import { validator } from '../schemas/validate.js'
import type { BodyParsers } from './body-parsers.js'
import { resourceRoutes } from './resource-routes.js'

const parseProxy = validator(ProxyBody)
const parseList = validator(ListProxiesQuery, { query: true })

/** Pre-configured proxies (management keys); they are invoked at `/proxy` with SVC-PROXY-KEY (see proxy.ts). */
export function proxiesRoutes(router: AppRouter, proxies: PreconfiguredProxiesService, audit: AuditRecorder, body: BodyParsers): void {
  resourceRoutes(router, audit, body, {
    type: 'proxy',
    path: '/proxies',
    parseCreate: parseProxy,
    parseUpdate: parseProxy,
    parseList,
    present: presentProxy,
    async create(caller, input) {
      const { proxy, key } = await proxies.createProxy(caller, input)
      return { record: proxy, key }
    },
    list: (tenantId, q) => proxies.listProxies(tenantId, q.page, q.size),
    get: proxies.getProxy,
    update: proxies.updateProxy,
    delete: proxies.deleteProxy,
  })
}
