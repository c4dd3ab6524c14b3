import { AppError } from '../errors/index.js'
import { assertPublicLiteral, DestinationRefusedError, type DestinationPolicy } from './destination-policy.js'
import { hasTraversal } from './path-traversal.js'

/** Where a proxied request goes: `origin` picks the connection pool, `path` is the request-target. */
export interface Destination {
  /** The parsed destination, for logging and for the node:http path. */
  url: URL
  /** `https://host[:port]` */
  origin: string
  /** Base path + sub-path + query, as concatenated (never re-serialized, so sent untouched). */
  path: string
}

// Scheme and authority must be spelled out: WHATWG parsing would accept `https:host`,
// `https:////host` and `https:\\host` and quietly pick a host the caller never wrote.
const SCHEME_AUTHORITY = /^(https?):\/\/([^/?#]*)/i
const HAS_SCHEME = /^([a-z][a-z0-9+.-]*):/i
// WHATWG strips or rewrites these (tabs, spaces, backslash -> slash), so the string checked would
// not be the URL parsed.
const BASE_UNSAFE = /[^\x21-\x7e\u00a0-\uffff]|\\/
// The sub-path and query come from the request line and are sent as they are: printable ASCII
// only, no backslash (some servers treat it as a separator) and no fragment.
const SUFFIX_UNSAFE = /[^\x21-\x7e]|[\\#]/
/**
 * Base URL (trailing `/` stripped) + sub-path + query, by concatenation, checked to stay under the
 * base URL's origin and path. `subPath` is the raw (undecoded) path after `/proxy`, '' or `/...`;
 * `rawQuery` is the raw query without `?`. Throws AppError `bad_request` when the base URL is
 * missing or unparseable, `destination_refused` for every refused form.
 */
export function buildDestination(
  baseUrl: string | undefined,
  subPath: string,
  rawQuery: string,
  policy: DestinationPolicy,
): Destination {
  const base = parseBase(baseUrl, policy)
  checkSuffix(subPath, rawQuery)
  const basePath = base.pathname.replace(/\/+$/, '')
  const path = (basePath + subPath || '/') + joinQuery(base.search, rawQuery)
  let url: URL
  try {
    url = new URL(base.origin + path)
  } catch (cause) {
    throw new AppError('bad_request', { detail: 'The destination URL is invalid.', cause })
  }
  // Belt and braces: whatever the checks above missed, the parsed result must still be under base.
  if (url.origin !== base.origin || !isUnder(url.pathname, basePath)) {
    throw refuse('The destination leaves the base URL.')
  }
  return { url, origin: base.origin, path }
}

const MAX_HOST_CHARS = 253

function parseBase(raw: string | undefined, policy: DestinationPolicy): URL {
  if (raw === undefined || raw.trim() === '') {
    throw new AppError('bad_request', { detail: 'The SVC-PROXY-URL header is required.' })
  }
  if (BASE_UNSAFE.test(raw)) throw refuse('The URL contains whitespace, control characters or a backslash.')
  const m = SCHEME_AUTHORITY.exec(raw)
  if (m === null) {
    const scheme = HAS_SCHEME.exec(raw)?.[1]?.toLowerCase()
    const isHttp = scheme === 'https' || scheme === 'http'
    throw refuse(scheme && !isHttp ? `The scheme ${scheme} is not allowed.` : 'The URL must be absolute.')
  }
  if (m[1]?.toLowerCase() === 'http' && !policy.allowHttp) throw refuse('Only https destinations are allowed.')
  const authority = m[2] ?? ''
  if (authority === '') throw refuse('The URL has no host.')
  if (authority.includes('@')) throw refuse('Credentials in the URL are not allowed.')
  if (raw.includes('#')) throw refuse('A fragment is not allowed in the URL.')
  const basePath = raw.slice(m[0].length).split('?', 1)[0] ?? ''
  if (hasTraversal(basePath)) throw refuse('The URL path contains `..`, a dot segment with parameters or an empty segment.')
  let url: URL
  try {
    url = new URL(raw)
  } catch (cause) {
    throw new AppError('bad_request', { detail: 'The SVC-PROXY-URL header is not a valid URL.', cause })
  }
  // DNS names end at 253 characters; a longer one resolves nowhere, and its entries in the audit log would not fit.
  if (url.hostname.length > MAX_HOST_CHARS) throw refuse(`The host name is longer than ${MAX_HOST_CHARS} characters.`)
  if (!policy.allowPrivate) assertLiteral(url.hostname)
  return url
}

function checkSuffix(subPath: string, rawQuery: string): void {
  if (subPath !== '' && !subPath.startsWith('/')) throw refuse('The path must start with `/`.')
  if (SUFFIX_UNSAFE.test(subPath) || SUFFIX_UNSAFE.test(rawQuery)) {
    throw refuse('The path or query contains a character that is not allowed.')
  }
  if (hasTraversal(subPath)) throw refuse('The path contains `..`, a dot segment with parameters or an empty segment.')
}

function joinQuery(baseSearch: string, rawQuery: string): string {
  if (baseSearch === '') return rawQuery === '' ? '' : `?${rawQuery}`
  return rawQuery === '' ? baseSearch : `${baseSearch}&${rawQuery}`
}

function isUnder(pathname: string, basePath: string): boolean {
  return basePath === '' || pathname === basePath || pathname.startsWith(`${basePath}/`)
}

/** Fail fast on a refused IP literal; the connector checks again on the address it connects to. */
function assertLiteral(hostname: string): void {
  try {
    assertPublicLiteral(hostname)
  } catch (err) {
    if (err instanceof DestinationRefusedError) throw refuse(err.message, err)
    throw err
  }
}

function refuse(detail: string, cause?: unknown): AppError {
  return new AppError('destination_refused', { detail, cause })
}
