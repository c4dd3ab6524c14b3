/**
 * What the bench's two forwarders share (bench/lib/forwarder.ts on node:http, bench/lib/koa-forwarder.ts
 * on Koa): hop-by-hop headers, one keep-alive undici Pool per origin, the destination parsed once
 * per distinct `SVC-PROXY-URL` value, and a body read into one buffer.
 */
import { Pool } from 'undici'

const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'host', 'content-length'])

export interface Target {
  pool: Pool
  /** The destination's path without its trailing slash; the request path after `/proxy` is appended. */
  base: string
}

const pools = new Map<string, Pool>()
const targets = new Map<string, Target>()

/** Throws on a value that is not a URL. */
export function target(header: string): Target {
  let t = targets.get(header)
  if (!t) {
    const url = new URL(header)
    let pool = pools.get(url.origin)
    if (!pool) pools.set(url.origin, (pool = new Pool(url.origin, { connections: 128, keepAliveTimeout: 60_000 })))
    targets.set(header, (t = { pool, base: url.pathname.replace(/\/$/, '') }))
  }
  return t
}

/** Where a request to `/proxy<rest>` goes on the target. */
export function targetPath(to: Target, url: string): string {
  return to.base + url.slice('/proxy'.length) || '/'
}

/** The request's headers without hop-by-hop and `SVC-*` ones. */
export function forwardedHeaders(rawHeaders: string[]): Record<string, string> {
  const headers: Record<string, string> = {}
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!.toLowerCase()
    if (!HOP.has(name) && !name.startsWith('svc-')) headers[name] = rawHeaders[i + 1]!
  }
  return headers
}

/** The destination's answer headers without hop-by-hop ones (so without its content-length). */
export function answerHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {}
  for (const name in headers) {
    const value = headers[name]
    if (value !== undefined && !HOP.has(name)) out[name] = value
  }
  return out
}

export function readAll(stream: NodeJS.ReadableStream, done: (body: Buffer) => void, fail: (err: Error) => void): void {
  const chunks: Buffer[] = []
  stream.on('data', (c: Buffer) => chunks.push(c))
  stream.on('end', () => done(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)))
  stream.on('error', fail)
}

/** Prints the port the bench waits for once `server` listens. */
export function announce(server: { address(): unknown }): void {
  process.stdout.write(JSON.stringify({ port: (server.address() as { port: number }).port }) + '\n')
}
