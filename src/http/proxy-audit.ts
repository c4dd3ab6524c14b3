import { randomUUID } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import type { AuditRecorder } from '../audit/audit-log.js'
import { httpMethods, outcomeOf, type AuditEvent, type HttpMethod } from '../audit/events.js'
import { AppError } from '../errors/index.js'
import type { ExchangeAudit } from '../proxy/pipeline/index.js'
import type { Destination } from '../egress/destination-url.js'
import { requestAudit } from './audit-context.js'
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
 * entry), recorded before the code gets the plaintext.
 */
export class ProxyCallAudit implements ExchangeAudit {
  private readonly id = randomUUID()
  private started: number | undefined
  /** A `proxy.request` entry was recorded: the call's end is its `proxy.response`. */
  private requested = false
  private bridgeReads = false
  private readonly base: Omit<AuditEvent, 'action' | 'outcome' | 'status'>

  constructor(
    ctx: AppContext,
    private readonly recorder: AuditRecorder,
    destination: Destination,
    proxyId: string | undefined,
  ) {
    const method = ctx.method as HttpMethod
    this.base = {
      ...requestAudit(ctx),
      ...(httpMethods.includes(method) ? { request: { method, route: '/proxy' }, destination: { origin: destination.origin, method } } : {}),
      ...(proxyId ? { target: { type: 'proxy' as const, ids: [proxyId] } } : {}),
    }
  }

  async forwarding(tokenIds: readonly string[]): Promise<void> {
    if (tokenIds.length > 0 || this.bridgeReads) {
      await this.recorder.record([{ ...this.base, id: this.id, action: 'proxy.request', outcome: 'success', status: 200, tokenIds }])
      this.requested = true
    }
    this.started = performance.now()
  }

  /** A transform's bridge is about to hand its code plaintext: `reactor.token_read`, fail-closed. */
  readonly tokenRead = async (tokenIds: ReadonlySet<string>): Promise<void> => {
    this.bridgeReads = true
    await this.recorder.record([{ ...this.base, action: 'reactor.token_read', parentId: this.id, outcome: 'success', status: 200, tokenIds: [...tokenIds] }])
  }

  /** The call ended: `status` is what the caller gets, `destinationStatus` what the destination answered. */
  ended(status: number, destinationStatus: number | undefined): void {
    if (this.started === undefined) return
    const destination = this.base.destination && { ...this.base.destination, ...(destinationStatus === undefined ? {} : { status: destinationStatus }) }
    const end = this.requested ? { action: 'proxy.response' as const, parentId: this.id } : { action: 'proxy.call' as const, id: this.id, tokenIds: [] }
    this.recorder.note([
      {
        ...this.base,
        ...(destination ? { destination } : {}),
        ...end,
        outcome: outcomeOf(status),
        status,
        durationMs: Math.round(performance.now() - this.started),
      },
    ])
  }

  /** The call failed after forwarding began (destination unreachable, timed out, a transform failed). */
  failed(err: unknown): void {
    const status = err instanceof AppError ? err.status : 500
    const header = err instanceof AppError ? err.headers?.['SVC-PROXY-DESTINATION-STATUS'] : undefined
    this.ended(status, header === undefined ? undefined : Number(header))
  }
}
