/**
 * The shapes of HTTP parts handed back by untrusted code (transform code, a Reactor's
 * CustomHttpResponseError): checked here, with one rule each, before they reach a caller.
 * A primitive: it imports nothing, so the runtime child (reactors/runtime/child/) may use it too.
 */

// RFC 9110 5.1: a header name is a token.
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/
// RFC 9110 5.5: no control characters but horizontal tab, and (as Node's setHeader and undici
// refuse the rest) Latin-1 only: a value that passes here can always be written.
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/

// Framing is Tessera's (recomputed for the body it sends); hop-by-hop headers belong to one connection.
const NOT_RETURNED = new Set(['content-length', 'transfer-encoding', 'connection', 'keep-alive', 'upgrade', 'trailer', 'te', 'proxy-connection'])

/** Whether header `lowerName` is end to end: not framing or hop-by-hop. */
export function isEndToEndHeader(lowerName: string): boolean {
  return !NOT_RETURNED.has(lowerName)
}

/**
 * Whether code may set header `lowerName` on an answer to a caller: not framing or hop-by-hop
 * (`Transfer-Encoding` beside `Content-Length` desynchronized a front proxy), nor Tessera's own
 * `SVC-*` (a trace id, an idempotent replay).
 */
export function isAnswerHeader(lowerName: string): boolean {
  return !NOT_RETURNED.has(lowerName) && !lowerName.startsWith('svc-')
}

export function isHeaderName(name: string): boolean {
  return HEADER_NAME.test(name)
}

/** A header value as text: a string, or a number written out; undefined for anything else. */
export function headerValueText(value: unknown): string | undefined {
  return typeof value === 'string' || typeof value === 'number' ? String(value) : undefined
}

export function isHeaderValue(text: string): boolean {
  return HEADER_VALUE.test(text)
}

/** A status a caller can be answered with: an integer from 200 to 599. */
export function isAnswerStatus(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 200 && value <= 599
}

/** A plain object (not null, not an array): any untrusted JSON (token data, access rules) is checked with this too. */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
