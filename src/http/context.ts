import type { Router, RouterContext } from '@koa/router'
import type { Permission } from '../auth/permissions.js'
import type { Principal } from '../auth/principal.js'
import type { Problem } from '../errors/index.js'

/** What middleware leaves on `ctx.state` for the stages after it. */
export interface AppState {
  traceId: string
  /** The caller's address (X-Forwarded-For only from SVC_TRUSTED_PROXIES), for audit events. */
  clientIp?: string
  principal?: Principal
  /**
   * Who the audit log names when it is not the principal: a pre-configured proxy without
   * `require_auth` acts as its Application for whoever holds the proxy key, so its entries name
   * the proxy (kind `proxy`), not an Application whose key was never shown.
   */
  auditActor?: { tenantId: string; kind: 'proxy'; id: string }
  /**
   * The resource a refusal concerns when its caller may be anonymous (a pre-configured proxy
   * reached by its key, whatever SVC-API-KEY says): the entry names it and goes to its tenant's chain.
   */
  refused?: { tenantId: string; type: 'proxy'; id: string }
  body?: unknown
  /** The permission the route checks (`requirePermission`), named by a refusal's audit entry. */
  permission?: Permission
  /** That check (`requirePermission`), run again on the principal as resolved once the body is in. */
  requirement?: (principal: Principal) => void
  /**
   * The request made a change that stands whatever happens next (its audit event was built, see
   * `auditEvent`): a failure after it must not give the idempotency key up.
   */
  changed?: boolean
  /** The request body, when a stage before the route had to read it (idempotency keys). */
  rawBody?: Buffer
  /** Set by the proxy so its failures render as `{ proxy_error: <problem> }`. */
  wrapProblem?: (problem: Problem) => unknown
}

export type AppContext = RouterContext<AppState>
export type AppRouter = Router<AppState>
