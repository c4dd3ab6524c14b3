import { lookup as dnsLookup, type LookupAddress } from 'node:dns'
import { isIP, type LookupFunction } from 'node:net'
import ipaddr from 'ipaddr.js'
import { buildConnector } from 'undici'

/** `allowHttp` / `allowPrivate` mirror SVC_PROXY_ALLOW_HTTP / SVC_PROXY_ALLOW_PRIVATE (dev and tests only). */
export interface DestinationPolicy {
  allowHttp: boolean
  allowPrivate: boolean
}

/**
 * Raised inside the connector, before any byte leaves for the address. It is a plain Error (not
 * an AppError) because it travels through net/undici; forward.ts maps it to 400 destination_refused.
 */
export class DestinationRefusedError extends Error {
  readonly code = 'ERR_DESTINATION_REFUSED'
  constructor(message: string, options?: ErrorOptions) {
    super(message, options)
    this.name = 'DestinationRefusedError'
  }
}

// Only globally routable unicast is allowed; ipaddr.js names every special range, so an allowlist
// of 'unicast' refuses loopback, private, link-local, CGNAT, multicast, reserved, ULA, teredo...
const GLOBAL_UNICAST_V6 = ipaddr.IPv6.parseCIDR('2000::/3')
// RFC 8215's local-use NAT64 prefix, which ipaddr.js files under 'rfc6052' with the well-known
// 64:ff9b::/96: never globally routable, and it embeds its IPv4 in another layout than the /96.
const LOCAL_USE_NAT64 = ipaddr.IPv6.parseCIDR('64:ff9b:1::/48')
// Forms that carry an IPv4 address inside an IPv6 one; the embedded address decides.
const EMBEDDING_V4 = new Set(['ipv4Mapped', 'rfc6145', 'rfc6052', '6to4'])

/** True when `ip` (an IP literal, no brackets) is a public unicast address. */
export function isPublicAddress(ip: string): boolean {
  let addr: ipaddr.IPv4 | ipaddr.IPv6
  try {
    addr = ipaddr.parse(ip)
  } catch {
    return false
  }
  if (addr instanceof ipaddr.IPv4) return addr.range() === 'unicast'
  if (addr.match(LOCAL_USE_NAT64)) return false
  const range = addr.range()
  if (EMBEDDING_V4.has(range)) return isPublicAddress(embeddedV4(addr, range))
  // ::a.b.c.d (IPv4-compatible, deprecated) is 'unicast' to ipaddr.js but lies outside 2000::/3.
  return range === 'unicast' && addr.match(GLOBAL_UNICAST_V6)
}

function embeddedV4(v6: ipaddr.IPv6, range: string): string {
  const b = v6.toByteArray()
  // 6to4 (2002:AABB:CCDD::/48) keeps the IPv4 in bytes 2..5; the others (64:ff9b::/96 is the only
  // 'rfc6052' left by now) in the last 4 bytes.
  const at = range === '6to4' ? 2 : 12
  return `${b[at]}.${b[at + 1]}.${b[at + 2]}.${b[at + 3]}`
}

/** Throws DestinationRefusedError when `hostname` is an IP literal that is not public. */
export function assertPublicLiteral(hostname: string): void {
  const host = hostname.startsWith('[') ? hostname.slice(1, -1) : hostname
  if (isIP(host) !== 0 && !isPublicAddress(host)) {
    throw new DestinationRefusedError(`The address ${host} is not public.`)
  }
}

/**
 * A `lookup` for net/tls connect: resolves every address and refuses the connection unless all of
 * them are public. The socket connects to exactly the addresses checked here, so a DNS answer
 * cannot change between check and connect (no rebinding window).
 */
export const policyLookup: LookupFunction = (hostname, options, callback) => {
  dnsLookup(hostname, { ...options, all: true }, (err, addresses: LookupAddress[]) => {
    const first = err ? undefined : addresses[0]
    if (first === undefined || addresses.some((a) => !isPublicAddress(a.address))) {
      // One answer whether the name did not resolve or resolved to a non-public address: callers
      // must not learn which internal names exist, nor how they resolve (the cause is only logged).
      return callback(new DestinationRefusedError(`The host ${hostname} cannot be used as a destination.`, err ? { cause: err } : undefined), '', 0)
    }
    if (options.all) return callback(null, addresses)
    callback(null, first.address, first.family)
  })
}

/**
 * The SSRF guard of every outbound connection, for both senders (the undici connector and the
 * node:http path): net.connect skips `lookup` for IP literals, so `checkHost` refuses a private
 * literal before connecting, and names resolve through `lookup` (policyLookup). Under
 * SVC_PROXY_ALLOW_PRIVATE neither checks anything.
 */
export interface ConnectGuard {
  checkHost(hostname: string): void
  lookup: LookupFunction | undefined
}

export function connectGuard(allowPrivate: boolean): ConnectGuard {
  if (allowPrivate) return { checkHost: () => {}, lookup: undefined }
  return { checkHost: assertPublicLiteral, lookup: policyLookup }
}

/** undici connector that applies the guard before any byte leaves. */
export function createPolicyConnector(guard: ConnectGuard, timeoutMs: number): buildConnector.connector {
  const connect = buildConnector({ timeout: timeoutMs, ...(guard.lookup && { lookup: guard.lookup }) })
  return (options, callback) => {
    try {
      guard.checkHost(options.hostname)
    } catch (err) {
      callback(err as Error, null)
      return
    }
    connect(options, callback)
  }
}
