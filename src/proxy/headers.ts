import type { IncomingHttpHeaders } from 'node:http'

/** Headers of the incoming request: Node's `req.headers` (lower-case keys) or `req.rawHeaders`. */
export type HeaderInput = IncomingHttpHeaders | Record<string, string | string[] | undefined> | readonly string[]

/** Response headers as handed to the caller: lower-case names, repeated headers as arrays. */
export type ResponseHeaders = Record<string, string | string[]>

export interface OutboundHeaders {
  /** Flat `[name, value, name, value, ...]`, in the order received, names as received. */
  list: string[]
  /** Value of SVC-PROXY-KEEP-ALIVE, to be sent as `Keep-Alive`. */
  keepAlive: string | undefined
  /** Value of SVC-PROXY-CONNECTION, to be sent as `Connection`. */
  connection: string | undefined
}

// RFC 9110 7.6.1 hop-by-hop headers, plus `proxy-connection` (a de-facto one).
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
])

// Never forwarded: Host and Content-Length belong to the outbound call (the length is recomputed),
// `expect` was already answered by our own server (and undici refuses it), `http2-settings` only
// makes sense on the hop that negotiated it.
const REQUEST_DROPPED = new Set([...HOP_BY_HOP, 'host', 'content-length', 'expect', 'http2-settings'])

/**
 * The headers to send to the destination: everything except SVC-*, Host, Content-Length,
 * hop-by-hop headers and those named in the incoming Connection header. SVC-PROXY-KEEP-ALIVE and
 * SVC-PROXY-CONNECTION are picked out for the caller to inject.
 */
export function prepareRequestHeaders(input: HeaderInput): OutboundHeaders {
  const out: OutboundHeaders = { list: [], keepAlive: undefined, connection: undefined }
  if (isFlat(input)) {
    const named = connectionNamed(flatValue(input, 'connection'))
    for (let i = 0; i + 1 < input.length; i += 2) {
      addRequestHeader(out, input[i] as string, input[i + 1] as string, named)
    }
    return out
  }
  const named = connectionNamed(input.connection)
  for (const name in input) {
    const value = input[name]
    if (value === undefined) continue
    if (typeof value === 'string') addRequestHeader(out, name, value, named)
    else for (const v of value) addRequestHeader(out, name, v, named)
  }
  return out
}

function addRequestHeader(out: OutboundHeaders, name: string, value: string, named: string[] | undefined): void {
  const lower = name.toLowerCase()
  if (lower.startsWith('svc-')) {
    if (lower === 'svc-proxy-keep-alive') out.keepAlive = append(out.keepAlive, value)
    else if (lower === 'svc-proxy-connection') out.connection = append(out.connection, value)
    return
  }
  if (REQUEST_DROPPED.has(lower) || named?.includes(lower)) return
  out.list.push(name, value)
}

/** The destination's headers minus hop-by-hop ones and those its Connection header names. */
export function stripResponseHeaders(input: Record<string, string | string[] | undefined>): ResponseHeaders {
  const named = connectionNamed(input.connection)
  const out: ResponseHeaders = {}
  for (const name in input) {
    const value = input[name]
    if (value === undefined || HOP_BY_HOP.has(name) || named?.includes(name)) continue
    out[name] = value
  }
  return out
}

/** Header names listed in a Connection header, lower-cased; undefined when there is none. */
function connectionNamed(value: string | string[] | undefined): string[] | undefined {
  if (value === undefined) return undefined
  const joined = typeof value === 'string' ? value : value.join(',')
  return joined.split(',').map((token) => token.trim().toLowerCase())
}

function isFlat(input: HeaderInput): input is readonly string[] {
  return Array.isArray(input)
}

function flatValue(input: readonly string[], lowerName: string): string[] | undefined {
  let values: string[] | undefined
  for (let i = 0; i + 1 < input.length; i += 2) {
    if ((input[i] as string).toLowerCase() === lowerName) (values ??= []).push(input[i + 1] as string)
  }
  return values
}

// Repeated SVC-PROXY-* headers combine like any list-valued header (RFC 9110 5.3).
function append(current: string | undefined, value: string): string {
  return current === undefined ? value : `${current}, ${value}`
}
