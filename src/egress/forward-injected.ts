import http from 'node:http'
import https from 'node:https'
import { pipeline, Readable } from 'node:stream'
import type { ConnectGuard } from './destination-policy.js'
import { destinationTimeoutError, upgradeRefusedError } from './forward-errors.js'
import { stripResponseHeaders, type OutboundHeaders } from './headers.js'
import type { ForwardBody, ForwardRequest, ForwardResponse } from './forward-types.js'

/**
 * The path for calls that carry SVC-PROXY-KEEP-ALIVE / SVC-PROXY-CONNECTION. undici refuses a
 * `Keep-Alive` request header and swallows `Connection` (it always writes its own), so these rare
 * calls go through node:http, which sends a raw header list byte for byte. The same ConnectGuard
 * (literal check + policyLookup), time-out and response shape as the undici path.
 */
export interface InjectedSender {
  send(req: ForwardRequest, outbound: OutboundHeaders): Promise<ForwardResponse>
  close(): void
}

const METHODS_WITH_BODY = new Set(['POST', 'PUT', 'PATCH'])
const noop = (): void => {}

export function createInjectedSender(timeoutMs: number, guard: ConnectGuard): InjectedSender {
  // Pooled like the undici path, so `Connection: keep-alive` sent on behalf of the caller is honoured.
  const httpAgent = new http.Agent({ keepAlive: true })
  const httpsAgent = new https.Agent({ keepAlive: true })
  return {
    send(req, outbound) {
      const tls = req.destination.url.protocol === 'https:'
      return sendInjected(req, outbound, { tls, agent: tls ? httpsAgent : httpAgent, timeoutMs, guard })
    },
    close() {
      httpAgent.destroy()
      httpsAgent.destroy()
    },
  }
}

interface SendOptions {
  tls: boolean
  agent: http.Agent
  timeoutMs: number
  guard: ConnectGuard
}

function sendInjected(req: ForwardRequest, outbound: OutboundHeaders, o: SendOptions): Promise<ForwardResponse> {
  const { url, path } = req.destination
  o.guard.checkHost(url.hostname)
  const headers = injectedHeaders(req, outbound)
  return new Promise((resolve, reject) => {
    const outgoing = (o.tls ? https : http).request({
      agent: o.agent,
      hostname: url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname,
      port: url.port === '' ? undefined : Number(url.port),
      method: req.method,
      path,
      // An array is written as given: no Host, framing or Connection header is added or reordered.
      headers,
      lookup: o.guard.lookup,
      signal: req.signal,
    })
    // The socket time-out below is idle time, and a socket handed over on a 101 has none: the
    // answer's head must come within the time-out, whatever the destination does.
    const deadline = setTimeout(() => outgoing.destroy(destinationTimeoutError()), o.timeoutMs)
    // Stays attached after the response: a late socket error is reported on the response body.
    outgoing.on('error', (err) => {
      clearTimeout(deadline)
      reject(err)
    })
    outgoing.setTimeout(o.timeoutMs, () => outgoing.destroy(destinationTimeoutError()))
    // Asked for or not, a protocol switch is never relayed: the proxy does not tunnel.
    outgoing.on('upgrade', (_res, socket) => {
      clearTimeout(deadline)
      socket.destroy()
      reject(upgradeRefusedError())
    })
    outgoing.on('response', (res) => {
      clearTimeout(deadline)
      // Node drops an IncomingMessage's error when nobody listens; keep it on the stream for a
      // consumer that starts piping late (after-forward plugins), so it sees why, not just "closed".
      res.on('error', noop)
      resolve({ status: res.statusCode ?? 502, headers: stripResponseHeaders(res.headers), body: res })
    })
    writeBody(outgoing, req.body)
  })
}

function injectedHeaders(req: ForwardRequest, outbound: OutboundHeaders): string[] {
  const headers = ['Host', req.destination.url.host, ...outbound.list]
  // Keep-Alive means nothing on a connection that is not kept alive, so it implies keep-alive.
  headers.push('Connection', outbound.connection ?? 'keep-alive')
  if (outbound.keepAlive !== undefined) headers.push('Keep-Alive', outbound.keepAlive)
  const framing = framingHeader(req.method, req.body, req.contentLength)
  if (framing !== undefined) headers.push(...framing)
  return headers
}

/** Content-Length like undici would send it (node:http adds none for an array of headers). */
function framingHeader(method: string, body: ForwardBody | undefined, contentLength?: number): [string, string] | undefined {
  if (body instanceof Readable) {
    return contentLength === undefined ? ['Transfer-Encoding', 'chunked'] : ['Content-Length', String(contentLength)]
  }
  const length = body == null ? 0 : typeof body === 'string' ? Buffer.byteLength(body) : body.byteLength
  if (length === 0 && !METHODS_WITH_BODY.has(method.toUpperCase())) return undefined
  return ['Content-Length', String(length)]
}

function writeBody(outgoing: http.ClientRequest, body: ForwardBody | undefined): void {
  if (body instanceof Readable) {
    // pipeline destroys `outgoing` with the body's error, which then rejects the call.
    pipeline(body, outgoing, noop)
    return
  }
  if (body == null) outgoing.end()
  else outgoing.end(body)
}
