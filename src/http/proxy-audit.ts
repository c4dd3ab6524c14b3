import { randomUUID } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import type { AuditRecorder } from '../audit/audit-log.js'
import { httpMethods, outcomeOf, type AuditEvent, type HttpMethod } from '../audit/events.js'
import { AppError } from '../errors/index.js'
import type { ExchangeAudit } from '../proxy/pipeline/index.js'
import type { TokenView } from '../vault/token-service.js'
import type { Destination } from '../egress/destination-url.js'
import { fetchEvent, mostRevealing, requestAudit, type EventFields, type RequestAudit } from './audit-context.js'
import type { AppContext } from './context.js'

/**
 * The audit events of one proxied call. A call that detokenizes tokens into its request gets
 * `proxy.request`, recorded (fail-closed) once the pipeline has detokenized the request and
 * before a byte of it is forwarded: status 200 there means "authorized, forwarding"; if the
 * write fails the call answers 503 and the destination sees nothing. `proxy.response` (its
 * `parentId` is the request's entry) is noted when the call ends, forwarded or failed: the
 * caller's status, the destination's status and the duration. A call that detokenized nothing
 * revealed nothing: it gets one `proxy.call` entry, noted when it ends, with both halves' fields.
 * A call the pipeline answered itself (a transform's own answer, a bad expression) forwarded
 * nothing and gets no `proxy.*` entry; refusals are `auth.*` entries. A transform's bridge call
 * that reads tokens is a `reactor.token_read` entry (target: the proxy, parent: this call's
 * entry), recorded before the code gets the plaintext; one that stores tokens is a
 * `token.create` entry, recorded before the code gets them; a `fetch` is a `reactor.fetch`
 * entry, recorded before it sends; a refused one is an `auth.denied` entry, noted (all with
 * this call's entry as parent).
 */
export class ProxyCallAudit implements ExchangeAudit {
  private readonly id = randomUUID()
  private started: number | undefined
  /** A `proxy.request` entry was recorded: the call's end is its `proxy.response`. */
  private requested = false
  private bridgeReads = false
  /** Who, from where: the fields every entry of this call shares. */
  private readonly shared: RequestAudit
  private readonly method: HttpMethod | undefined
  private readonly target: AuditEvent['target']

  // Events are built with Object.assign and field by field, not by spreading a shared base: see
  // auditEvent for what a spread followed by more properties costs on Node 20.
  constructor(
    ctx: AppContext,
    private readonly recorder: AuditRecorder,
    private readonly destination: Destination,
    proxyId: string | undefined,
  ) {
    const method = ctx.method as HttpMethod
    this.shared = requestAudit(ctx)
    this.method = httpMethods.includes(method) ? method : undefined
    if (this.method) this.shared.request = { method: this.method, route: '/proxy' }
    this.target = proxyId ? { type: 'proxy', ids: [proxyId] } : undefined
  }

  /** The fields of every `proxy.*` and `reactor.token_read` entry of this call, and `fields`. */
  private event(fields: EventFields, destinationStatus?: number): AuditEvent {
    const event: AuditEvent = Object.assign({}, this.shared, fields)
    if (this.method) {
      event.destination = destinationStatus === undefined ? { origin: this.destination.origin, method: this.method } : { origin: this.destination.origin, method: this.method, status: destinationStatus }
    }
    if (this.target) event.target = this.target
    return event
  }

  async forwarding(tokenIds: readonly string[]): Promise<void> {
    if (!this.requested && (tokenIds.length > 0 || this.bridgeReads)) {
      await this.recorder.record([this.event({ id: this.id, action: 'proxy.request', outcome: 'success', status: 200, tokenIds })])
      this.requested = true
    }
    this.started = performance.now()
  }

  /** A transform's bridge is about to hand its code plaintext: `reactor.token_read`, fail-closed. */
  readonly tokenRead = async (tokenIds: ReadonlySet<string>): Promise<void> => {
    this.bridgeReads = true
    await this.recorder.record([this.event({ action: 'reactor.token_read', parentId: this.id, outcome: 'success', status: 200, tokenIds: [...tokenIds] })])
  }

  /** A transform's bridge stored tokens: `token.create` (target: the tokens), fail-closed. */
  readonly tokensCreated = async (tokenIds: string[], views: TokenView[]): Promise<void> => {
    const event: AuditEvent = Object.assign({}, this.shared, { action: 'token.create' as const, target: { type: 'token' as const, ids: tokenIds }, parentId: this.id, outcome: 'success' as const, status: 200 })
    const transform = mostRevealing(views)
    if (transform) event.transform = transform
    await this.recorder.record([event])
  }

  /** A transform's `fetch` is about to send: `reactor.fetch` (its own destination), fail-closed. */
  readonly fetching = (origin: string, method: string): Promise<void> => this.recorder.record([fetchEvent(this.shared, this.target, this.id, origin, method)])

  /** A transform's bridge call was refused: `auth.denied` (`auth.failed` for an expired Application), noted. */
  readonly denied = (status: number): void => {
    this.recorder.note([this.event({ action: status === 401 ? 'auth.failed' : 'auth.denied', parentId: this.id, outcome: 'denied', status })])
  }

  /**
   * The call ended: `status` is what the caller gets, `destinationStatus` what the destination
   * answered; `complete` false when the answer was cut after its head (a failure, whatever its status).
   */
  ended(status: number, destinationStatus: number | undefined, complete = true): void {
    if (this.started === undefined) return
    const durationMs = Math.round(performance.now() - this.started)
    const outcome = complete ? outcomeOf(status) : 'failure'
    this.recorder.note([
      this.requested
        ? this.event({ action: 'proxy.response', parentId: this.id, outcome, status, durationMs }, destinationStatus)
        : this.event({ action: 'proxy.call', id: this.id, tokenIds: [], outcome, status, durationMs }, destinationStatus),
    ])
  }

  /** The call failed after forwarding began (destination unreachable, timed out, a transform failed). */
  failed(err: unknown): void {
    const status = err instanceof AppError ? err.status : 500
    const header = err instanceof AppError ? err.headers?.['SVC-PROXY-DESTINATION-STATUS'] : undefined
    this.ended(status, header === undefined ? undefined : Number(header))
  }
}
