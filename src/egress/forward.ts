import { Readable } from 'node:stream'
import { Agent, type Dispatcher } from 'undici'
import { AppError } from '../errors/index.js'
import { isAnswerStatus } from '../shapes/http-parts.js'
import { connectGuard, createPolicyConnector } from './destination-policy.js'
import { discardBody } from './body.js'
import { withinDeadline } from './deadline.js'
import { createInjectedSender } from './forward-injected.js'
import type { Forwarder, ForwarderOptions, ForwardRequest, ForwardResponse } from './forward-types.js'
import { toForwardError } from './forward-errors.js'
import { injectedHeaderProblem, prepareRequestHeaders, stripResponseHeaders } from './headers.js'

export type { ForwardBody, Forwarder, ForwarderOptions, ForwardRequest, ForwardResponse } from './forward-types.js'

/**
 * One per app: a pooled keep-alive undici Agent whose connector enforces the destination policy
 * on the addresses actually connected to. Redirects are never followed (undici's request() does
 * not follow them), so a 3xx comes back as it came. Every call, head and body, ends within
 * `timeoutMs` (deadline.ts).
 */
export function createForwarder(options: ForwarderOptions): Forwarder {
  const { timeoutMs } = options
  const guard = connectGuard(options.allowPrivate)
  const agent = new Agent({
    connect: createPolicyConnector(guard, timeoutMs),
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
  })
  const injected = createInjectedSender(timeoutMs, guard)
  const running = new Set<Promise<unknown>>()
  let aborted = false
  const send = async (req: ForwardRequest): Promise<ForwardResponse> => {
    // buildDestination checks the scheme too; this guards destinations built any other way.
    if (req.destination.url.protocol !== 'https:' && !options.allowHttp) {
      throw new AppError('destination_refused', { detail: 'Only https destinations are allowed.' })
    }
    const outbound = prepareRequestHeaders(req.headers)
    try {
      if (outbound.keepAlive !== undefined || outbound.connection !== undefined) {
        const problem = injectedHeaderProblem(outbound)
        if (problem !== undefined) throw new AppError('bad_request', { detail: problem })
        return relayable(await withinDeadline(injected.send(req, outbound), timeoutMs))
      }
      return relayable(await withinDeadline(sendWithUndici(agent, req, outbound.list), timeoutMs))
    } catch (err) {
      throw aborted ? abortedAtShutdown(err) : toForwardError(err)
    }
  }
  return {
    forward(req) {
      const call = send(req)
      running.add(call)
      void call.then(() => running.delete(call), () => running.delete(call))
      return call
    },
    async close() {
      // After abort() there is nothing left to wait for, and undici refuses to close a destroyed agent.
      if (aborted) return
      await agent.close()
      injected.close()
    },
    async abort() {
      aborted = true
      injected.close()
      await agent.destroy(abortedAtShutdown(undefined))
      // Whoever waits on a call (its audit entry, its answer) has seen it fail when abort() resolves.
      await Promise.allSettled([...running])
    },
  }
}

/**
 * A final status the caller can be answered with. node:http passes 0-99 and 600-999 through (and
 * writing 0-99 back threw after the answer was claimed: the caller waited for ever); like
 * nginx, a status outside 200-599 is the destination's fault, not something to relay.
 */
function relayable(res: ForwardResponse): ForwardResponse {
  if (!isAnswerStatus(res.status)) {
    discardBody(res.body)
    throw new AppError('destination_unreachable', { detail: 'The destination answered with a status outside 200-599.' })
  }
  if (res.status !== 204 && res.status !== 304) return res
  // Neither has a body, whatever the framing says: a 304 may carry the Content-Length of the
  // representation (RFC 9110 8.6), over which undici fails the empty body, and a 204 must not
  // carry one at all (RFC 9110 8.6).
  discardBody(res.body)
  const { 'content-length': length, ...headers } = res.headers
  return { status: res.status, headers: res.status === 304 && length !== undefined ? { ...headers, 'content-length': length } : headers, body: Readable.from([]) }
}

/**
 * Whether the destination got the call (a queued one did not; one being written or answered
 * did) cannot be told here, and it may have acted on it (a charge): answered as the proxy's own
 * time-out, never with Retry-After, so that a client retrying 503s does not send it twice.
 */
function abortedAtShutdown(cause: unknown): AppError {
  return new AppError('destination_timeout', { detail: 'The service shut down before the destination answered; the call may have been sent, so whether the destination acted on it is unknown.', cause })
}

async function sendWithUndici(agent: Agent, req: ForwardRequest, headers: string[]): Promise<ForwardResponse> {
  if (req.contentLength !== undefined && req.body instanceof Readable) {
    headers.push('content-length', String(req.contentLength))
  }
  const res = await agent.request({
    origin: req.destination.origin,
    path: req.destination.path,
    method: req.method as Dispatcher.HttpMethod,
    headers,
    body: req.body ?? null,
    signal: req.signal ?? null,
  })
  // undici itself listens for the body's 'error' before destroying it, so a body that fails before
  // the caller starts piping cannot crash the process; the error stays on the stream.
  return { status: res.statusCode, headers: stripResponseHeaders(res.headers), body: res.body }
}
