import type { Readable } from 'node:stream'
import type { Destination } from './destination-url.js'
import type { HeaderInput, ResponseHeaders } from './headers.js'

/** The types of outbound HTTP: one call (shared by both senders, undici and node:http) and the forwarder. */
export type ForwardBody = Buffer | Uint8Array | string | Readable | null

export interface ForwardRequest {
  method: string
  /** From buildDestination. */
  destination: Destination
  /** The incoming headers, unfiltered: forward() strips SVC-*, Host, Content-Length and hop-by-hop. */
  headers: HeaderInput
  body?: ForwardBody
  /** Sent as Content-Length for a stream body; without it a stream goes chunked. */
  contentLength?: number
  /** Abort the outbound call when the client goes away. */
  signal?: AbortSignal
}

export interface ForwardResponse {
  status: number
  /** Destination headers minus hop-by-hop ones; lower-case names, repeated ones as arrays. */
  headers: ResponseHeaders
  /**
   * Streamed, never buffered. Errors (never ends cleanly) when the destination resets or stalls
   * mid-body, so piping it aborts the client response. Destroy it if it is not consumed.
   */
  body: Readable
}

export interface ForwarderOptions {
  /** SVC_PROXY_TIMEOUT_MS: the whole call's deadline, and the connect, headers and body idle time-outs within it. */
  timeoutMs: number
  allowPrivate: boolean
  allowHttp: boolean
}

export interface Forwarder {
  forward(req: ForwardRequest): Promise<ForwardResponse>
  /** Waits for in-flight calls, then closes every pooled connection; after abort(), nothing to do. */
  close(): Promise<void>
  /**
   * The shutdown deadline: every call in flight fails at once with 504 (its outcome unknown: it
   * may have been sent), every connection closes; resolves once every call has failed.
   */
  abort(): Promise<void>
}
