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

const CONNECTION_OPTIONS = new Set(['keep-alive', 'close'])
// RFC 9112 appendix C.2.2's two parameters, each once: `timeout=5, max=100`.
const KEEP_ALIVE_PARAM = /^(timeout|max)=(\d{1,9})$/i

/**
 * SVC-PROXY-CONNECTION and SVC-PROXY-KEEP-ALIVE are written to a pooled connection that other
 * tenants' calls reuse, so only the documented values pass: `keep-alive` or `close`, and
 * `timeout=<n>`/`max=<n>`. Anything else (`Upgrade`, header names to strip, list tricks) is a
 * 400: the proxy does not tunnel upgrades. Returns the problem, or undefined when both are fine.
 */
export function injectedHeaderProblem(outbound: OutboundHeaders): string | undefined {
  const { connection, keepAlive } = outbound
  if (connection !== undefined && !CONNECTION_OPTIONS.has(connection.trim().toLowerCase())) {
    return 'SVC-PROXY-CONNECTION must be keep-alive or close (the proxy does not tunnel upgrades).'
  }
  if (keepAlive !== undefined) {
    const names = keepAlive.split(',').map((param) => KEEP_ALIVE_PARAM.exec(param.trim())?.[1]?.toLowerCase())
    if (names.some((name) => name === undefined) || new Set(names).size !== names.length) {
      return 'SVC-PROXY-KEEP-ALIVE must be timeout=<seconds> and/or max=<requests>, comma-separated.'
    }
  }
  return undefined
}

/**
 * The destination's headers minus hop-by-hop ones, those its Connection header names, and
 * Tessera's own (`SVC-*`): a destination must not replace the caller's trace id or claim an
 * idempotent replay.
 */
export function stripResponseHeaders(input: Record<string, string | string[] | undefined>): ResponseHeaders {
  const named = connectionNamed(input.connection)
  const out: ResponseHeaders = {}
  for (const name in input) {
    const value = input[name]
    if (value === undefined || HOP_BY_HOP.has(name) || name.startsWith('svc-') || named?.includes(name)) continue
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

/** The first value of `lowerName` in a flat header list, the one Node keeps for single-valued headers. */
export function findHeader(headers: readonly string[], lowerName: string): string | undefined {
  return flatValue(headers, lowerName)?.[0]
}

/** Every value of `lowerName` in a flat header list, in order; undefined when there is none. */
export function flatValue(input: readonly string[], lowerName: string): string[] | undefined {
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

/**
 * The content coding (RFC 9110 8.4) a Content-Encoding value names, lower case, or undefined for
 * none or `identity`. A coded body is bytes Tessera cannot read: its expressions are not
 * evaluated, and transforms refuse it.
 */
export function contentCoding(value: string | string[] | undefined): string | undefined {
  if (value === undefined) return undefined
  const codings = (typeof value === 'string' ? value : value.join(','))
    .split(',')
    .map((coding) => coding.trim().toLowerCase())
    .filter((coding) => coding !== '' && coding !== 'identity')
  return codings.length === 0 ? undefined : codings.join(', ')
}

/** A new flat header list with every `lowerName` header replaced by one `name: value`. */
export function withHeader(headers: readonly string[], lowerName: string, value: string): string[] {
  const out: string[] = []
  for (let i = 0; i + 1 < headers.length; i += 2) {
    if ((headers[i] as string).toLowerCase() !== lowerName) out.push(headers[i] as string, headers[i + 1] as string)
  }
  out.push(lowerName, value)
  return out
}
