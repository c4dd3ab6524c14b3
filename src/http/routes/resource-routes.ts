import type { AuditRecorder } from '../../audit/audit-log.js'
import type { Principal } from '../../auth/principal.js'
import type { Page } from '../../store/index.js'
import { changeEvent } from '../audit-context.js'
import type { AppRouter } from '../context.js'
import { currentPrincipal, requirePermission } from '../middleware/authenticate.js'
import { presentPage } from '../presenters/common.js'
import type { BodyParsers } from './body-parsers.js'

/** The management resources of a tenant that share the five routes below. */
export type ManagedResource = 'application' | 'reactor' | 'proxy'

/** One resource: its service calls, its request parsers and its presenter. */
export interface ResourceSpec<R extends { id: string }, C, U, Q extends { page: number; size: number }> {
  type: ManagedResource
  /** The collection, e.g. `/reactors`; one record is `<path>/:id`. */
  path: string
  parseCreate(body: unknown): C
  parseUpdate(body: unknown): U
  parseList(query: Record<string, unknown>): Q
  /** `key` only when one was just issued (shown once). */
  present(record: R, key?: string): unknown
  create(caller: Principal, input: C): Promise<{ record: R; key?: string }>
  list(tenantId: string, query: Q): Promise<Page<R>>
  get(tenantId: string, id: string): Promise<R>
  update(caller: Principal, id: string, input: U): Promise<R>
  delete(caller: Principal, id: string): Promise<void>
}

/**
 * Create, list, get, replace and delete of one resource, each behind `<type>:<verb>`. A change
 * is recorded (`<type>.<verb>`) after it is made and before it is answered (see changeEvent).
 * Routes of the collection that are not an id (`/applications/key`) must be registered first.
 */
export function resourceRoutes<R extends { id: string }, C, U, Q extends { page: number; size: number }>(
  router: AppRouter,
  audit: AuditRecorder,
  body: BodyParsers,
  spec: ResourceSpec<R, C, U, Q>,
): void {
  const { type, path } = spec
  router.post(path, requirePermission(`${type}:create`), body.json, async (ctx) => {
    const { record, key } = await spec.create(currentPrincipal(ctx.state), spec.parseCreate(ctx.state.body))
    await audit.record([changeEvent(ctx, `${type}.create`, type, record.id, 201)])
    ctx.status = 201
    ctx.body = spec.present(record, key)
  })

  router.get(path, requirePermission(`${type}:read`), async (ctx) => {
    const query = spec.parseList({ ...ctx.query })
    const page = await spec.list(currentPrincipal(ctx.state).tenantId, query)
    ctx.body = presentPage(page.items, page.total, query.page, query.size, (record) => spec.present(record))
  })

  router.get(`${path}/:id`, requirePermission(`${type}:read`), async (ctx) => {
    ctx.body = spec.present(await spec.get(currentPrincipal(ctx.state).tenantId, ctx.params.id!))
  })

  router.put(`${path}/:id`, requirePermission(`${type}:update`), body.json, async (ctx) => {
    const record = await spec.update(currentPrincipal(ctx.state), ctx.params.id!, spec.parseUpdate(ctx.state.body))
    await audit.record([changeEvent(ctx, `${type}.update`, type, record.id, 200)])
    ctx.body = spec.present(record)
  })

  router.delete(`${path}/:id`, requirePermission(`${type}:delete`), async (ctx) => {
    await spec.delete(currentPrincipal(ctx.state), ctx.params.id!)
    await audit.record([changeEvent(ctx, `${type}.delete`, type, ctx.params.id!, 204)])
    ctx.status = 204
  })
}
