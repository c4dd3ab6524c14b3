import type { Readable } from 'node:stream'
import type { Principal } from '../auth/principal.js'
import { AppError } from '../errors/index.js'
import type { DestinationPolicy } from '../egress/destination-policy.js'
import { buildDestination, type Destination } from '../egress/destination-url.js'
import type { ForwardBody, Forwarder } from '../egress/forward.js'
import type { ResponseHeaders } from '../egress/headers.js'
import { bufferSmallBody, discardBody } from '../egress/body.js'
import type { Caller, Exchange, ExchangeAudit, Pipeline } from './pipeline/index.js'

export type { Caller }

export interface ProxyCall {
  principal: Principal
  /** Who transforms act as (a pre-configured proxy's Application). */
  actor?: Principal | undefined
  method: string
  destination: Destination
  /** Raw path after `/proxy` and raw query, as received. */
  path: string
  query: string
  /** Flat `[name, value, ...]` as received. */
  headers: readonly string[]
  body: Buffer
  caller: Caller
  audit?: ExchangeAudit | undefined
}

export interface ProxyResult {
  status: number
  headers: ResponseHeaders
  /** The destination's body is a stream that must be consumed or destroyed. */
  body: Readable | Buffer | string
  /** The destination's own status, when it answered; undefined for an answer of the service's own. */
  destinationStatus: number | undefined
}

export interface ProxyService {
  /** 400 when the base URL is missing or invalid, 400 destination_refused when the policy refuses it. */
  destination(baseUrl: string | undefined, path: string, query: string): Destination
  /** resolve destination -> beforeForward plugins -> forward -> afterForward plugins. */
  call(call: ProxyCall): Promise<ProxyResult>
}

/** One proxy: a plugin pipeline around the shared forwarder. Issue-6 proxies differ only in `pipeline`. */
export function createProxyService(deps: { forwarder: Forwarder; pipeline: Pipeline; policy: DestinationPolicy }): ProxyService {
  const { forwarder, pipeline, policy } = deps
  // Callers send the same few destinations over and over, and parsing and checking a URL is a
  // visible share of a proxied call. Only accepted destinations are kept; the key's separator
  // cannot occur in a header value or a request line. Bounded (entries and bytes) by clearing when full.
  const destinations = new Map<string, Destination>()
  let destinationBytes = 0
  return {
    destination(baseUrl, path, query) {
      const key = `${baseUrl}\n${path}\n${query}`
      let destination = destinations.get(key)
      if (destination === undefined) {
        destination = buildDestination(baseUrl, path, query, policy)
        // The key, and the URL and strings parsed from it: about four times the key in UTF-16.
        const bytes = key.length * 8
        if (destinations.size >= DESTINATION_CACHE_SIZE || destinationBytes + bytes > DESTINATION_CACHE_BYTES) {
          destinations.clear()
          destinationBytes = 0
        }
        destinations.set(key, destination)
        destinationBytes += bytes
      }
      return destination
    },

    async call(call) {
      const exchange: Exchange = {
        principal: call.principal,
        actor: call.actor,
        destination: call.destination,
        incoming: { method: call.method, path: call.path, query: call.query, headers: call.headers, body: call.body },
        outgoing: { headers: call.headers, body: call.body },
        response: undefined,
        caller: call.caller,
        audit: call.audit,
      }
      const early = await pipeline.run('beforeForward', exchange)
      if (early) return { status: early.status, headers: early.headers, body: early.body, destinationStatus: undefined }
      if (call.audit) await call.audit.forwarding(exchange.detokenized ? [...exchange.detokenized] : [])
      const response = await forwarder.forward({
        method: call.method,
        destination: call.destination,
        headers: exchange.outgoing.headers,
        body: orNull(exchange.outgoing.body),
      })
      exchange.response = response
      let late
      try {
        late = await pipeline.run('afterForward', exchange)
      } catch (err) {
        discardBody(response.body)
        throw answeredFailure(err, response.status)
      }
      if (late === undefined) return { status: response.status, headers: response.headers, body: await bufferSmallBody(response.body, response.headers), destinationStatus: response.status }
      if (late.body !== response.body) discardBody(response.body)
      return { status: late.status, headers: late.headers, body: late.body, destinationStatus: response.status }
    },
  }
}

const DESTINATION_CACHE_SIZE = 1024
const DESTINATION_CACHE_BYTES = 512 * 1024
/**
 * An after-forward failure (a response transform that throws, say) still happens after the
 * destination answered, and the call may have had effects there (a charge): the caller keeps
 * SVC-PROXY-DESTINATION-STATUS so it can tell this from a request that never left.
 */
function answeredFailure(err: unknown, status: number): unknown {
  if (!(err instanceof AppError)) return err
  const headers = { ...err.headers, 'SVC-PROXY-DESTINATION-STATUS': String(status) }
  return new AppError(err.code, { detail: err.detail, errors: err.errors, headers, cause: err })
}

// An empty body goes out as none, so GET and DELETE carry no Content-Length: 0.
function orNull(body: ForwardBody): ForwardBody {
  if (body === null) return null
  if (typeof body === 'string' || body instanceof Uint8Array) return body.length === 0 ? null : body
  return body
}
