import type { Readable } from 'node:stream'
import type { Principal } from '../../auth/principal.js'
import type { Destination } from '../../egress/destination-url.js'
import type { ForwardBody, ForwardResponse } from '../../egress/forward.js'
import type { ResponseHeaders } from '../../egress/headers.js'
import type { TokenView } from '../../vault/token-service.js'

/** The caller's request as received. Never mutated: plugins write `outgoing` instead. */
export interface IncomingParts {
  method: string
  /** Raw (undecoded) path after `/proxy`: '' or `/...`. */
  path: string
  /** Raw query string, without `?`. */
  query: string
  /** Flat `[name, value, ...]` as received (Node's rawHeaders): names keep their case, repeats stay. */
  headers: readonly string[]
  body: Buffer
}

/**
 * What is sent to the destination. It starts as the incoming headers and body themselves (no
 * copies); a plugin that changes them replaces the array or body rather than editing it in place.
 * Headers are unfiltered: forward() drops SVC-*, Host, Content-Length and hop-by-hop ones.
 */
export interface OutgoingParts {
  headers: readonly string[]
  body: ForwardBody
}

/** One proxied call as it moves through the pipeline. */
export interface Exchange {
  /**
   * Whose permissions detokenization acts with: the caller, or a pre-configured proxy's
   * Application (which a request transform resolves again once its code ran: it may have been
   * deleted or narrowed meanwhile).
   */
  principal: Principal
  /** Who Reactor code run by the pipeline (transforms) acts as: a pre-configured proxy's Application. */
  readonly actor?: Principal | undefined
  readonly destination: Destination
  readonly incoming: IncomingParts
  readonly outgoing: OutgoingParts
  /** The call's audit side (http/proxy-audit.ts); absent where nothing is audited (unit tests). */
  readonly audit?: ExchangeAudit | undefined
  /** Token ids the detokenize plugin put into the outgoing request (for the audit log). */
  detokenized?: ReadonlySet<string> | undefined
  /** The destination's answer, set before `afterForward`; its body is still unread. */
  response: ForwardResponse | undefined
  /** The caller's side: `caller.signal` is aborted when the caller goes away; plugins doing I/O pass it on. */
  readonly caller: Caller
}

/** The promises are awaited, fail-closed: a rejection (the audit log is unavailable) stops the call with it. */
export interface ExchangeAudit {
  /**
   * Before the request is forwarded, with the token ids detokenized into it (`proxy.request`):
   * called by detokenization as soon as it has read the tokens, before it renders anything from
   * their data (a rendering error tells something of the data), and again just before the
   * forward; the entry is written once.
   */
  forwarding(tokenIds: readonly string[]): Promise<void>
  /** Before a transform's bridge hands its code plaintext (`reactor.token_read`). */
  tokenRead(tokenIds: ReadonlySet<string>): Promise<void>
  /** After a transform's `req.svc.tokenize` stored tokens, before the code gets them (`token.create`). */
  tokensCreated(tokenIds: string[], views: TokenView[], stored: boolean): Promise<void>
  /** A transform's bridge call was refused (`auth.denied` / `auth.failed`); noted, not awaited. */
  denied(status: number): void
  /** Before a transform's `fetch` sends anything (`reactor.fetch`). */
  fetching(origin: string, method: string): Promise<void>
}

/** `signal` is made on first use: an AbortSignal with a listener costs the hot path dearly. */
export interface Caller {
  readonly signal: AbortSignal
}

/** A plugin's own answer: it ends the exchange, and nothing after it runs (nor the forward). */
export interface Respond {
  status: number
  headers: ResponseHeaders
  body: Buffer | string | Readable
}
