import { isIP } from 'node:net'
import ipaddr from 'ipaddr.js'

type Address = ipaddr.IPv4 | ipaddr.IPv6
type Range = [Address, number]
/** A socket address as the limits see it. */
interface Peer {
  addr: Address
  bucket: string
  trusted: boolean
}

const PEER_CACHE_SIZE = 10_000

/** (socket address, X-Forwarded-For header) -> the client IP the limits count against. */
export type ClientIpResolver = (peer: string | undefined, forwardedFor: string | undefined) => string

/**
 * The client IP is the socket address, unless that peer is a trusted proxy: then X-Forwarded-For
 * is walked from the right (each trusted proxy appends the address it saw) and the first hop
 * that is not itself trusted is the client. Hops left of it were written by the client and are
 * ignored, so a spoofed header changes nothing. Throws at start-up on a malformed entry.
 *
 * An IPv6 client is counted by its network of `ipv6PrefixLength` bits (`2001:db8:1:2::/64`):
 * one subscriber usually holds a whole /64, and counting per address would give it 2^64
 * buckets. 128 counts single addresses.
 */
export function createClientIpResolver(trustedProxies: readonly string[], ipv6PrefixLength = 128): ClientIpResolver {
  const ranges = trustedProxies.map(parseRange)
  const bucket = (addr: Address): string => {
    if (addr.kind() === 'ipv4' || ipv6PrefixLength >= 128) return addr.toString()
    return `${ipaddr.IPv6.networkAddressFromCIDR(`${addr.toString()}/${ipv6PrefixLength}`).toString()}/${ipv6PrefixLength}`
  }
  const isTrusted = (addr: Address) => ranges.some(([net, bits]) => addr.kind() === net.kind() && addr.match(net, bits))

  // Every request asks about its socket's address and a process sees few distinct ones at a
  // time: each is parsed, bucketed and checked once, not per request. Bounded by clearing when full.
  const peers = new Map<string, Peer | null>()
  const peerOf = (peer: string): Peer | null => {
    let known = peers.get(peer)
    if (known === undefined) {
      const addr = parseAddress(peer)
      known = addr ? { addr, bucket: bucket(addr), trusted: isTrusted(addr) } : null
      if (peers.size >= PEER_CACHE_SIZE) peers.clear()
      peers.set(peer, known)
    }
    return known
  }

  return (peer, forwardedFor) => {
    // Without an address (socket already gone) every such request shares one bucket.
    if (peer === undefined) return 'unknown'
    const socketPeer = peerOf(peer)
    if (!socketPeer) return peer
    if (!forwardedFor || !socketPeer.trusted) return socketPeer.bucket
    const hops = forwardedFor.split(',')
    let client = socketPeer.addr
    for (let i = hops.length - 1; i >= 0 && isTrusted(client); i--) {
      const hop = parseAddress(hops[i])
      // A malformed hop ends the chain we can vouch for: the last trusted hop stands in.
      if (!hop) break
      client = hop
    }
    return bucket(client)
  }
}

/** One SVC_TRUSTED_PROXIES entry (address or CIDR); throws naming the entry when malformed. */
export function parseRange(entry: string): Range {
  try {
    if (entry.includes('/')) {
      const [addr, bits] = ipaddr.parseCIDR(entry)
      // Addresses are compared unmapped, so an IPv4-mapped range must be unmapped too.
      const v4 = unmap(addr)
      return v4 !== addr && bits >= 96 ? [v4, bits - 96] : [addr, bits]
    }
    const addr = parseAddress(entry)
    if (addr) return [addr, addr.kind() === 'ipv4' ? 32 : 128]
  } catch {
    // fall through to the error below
  }
  throw new Error(`SVC_TRUSTED_PROXIES: "${entry}" is not an IP address or CIDR`)
}

/** Strict parse (no "127.1" shorthands), tolerating a port, brackets and IPv4-mapped IPv6. */
function parseAddress(raw: string | undefined): Address | undefined {
  if (raw === undefined) return undefined
  let s = raw.trim()
  const v4WithPort = /^(\d{1,3}(?:\.\d{1,3}){3}):\d+$/.exec(s)
  if (v4WithPort?.[1]) s = v4WithPort[1]
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(s)
  if (bracketed?.[1]) s = bracketed[1]
  if (isIP(s) === 0) return undefined
  return unmap(ipaddr.parse(s))
}

/** Dual-stack sockets report IPv4 clients as ::ffff:a.b.c.d; count them as the IPv4 address. */
function unmap(addr: Address): Address {
  return addr.kind() === 'ipv6' && (addr as ipaddr.IPv6).isIPv4MappedAddress() ? (addr as ipaddr.IPv6).toIPv4Address() : addr
}
