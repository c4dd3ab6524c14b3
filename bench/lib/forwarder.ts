/**
 * Baseline (b) of the proxy bench: the cheapest correct forwarder, which every proxy ratio is
 * measured against. A node:http server reads the request body into one buffer, drops hop-by-hop
 * and `SVC-*` headers, sends it over a keep-alive undici Pool to the `SVC-PROXY-URL` origin,
 * reads the answer into one buffer and sends it back with `content-length`. Nothing else: the
 * destination is parsed once per distinct `SVC-PROXY-URL` value, not per request, and nothing is
 * streamed. Run as its own process, pinned like Tessera. Prints `{"port":N}` once listening.
 */
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { Pool } from 'undici'

const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'host', 'content-length'])

interface Target {
  pool: Pool
  /** The destination's path without its trailing slash; the request path after `/proxy` is appended. */
  base: string
}

const pools = new Map<string, Pool>()
const targets = new Map<string, Target>()

function target(header: string): Target {
  let t = targets.get(header)
  if (!t) {
    const url = new URL(header)
    let pool = pools.get(url.origin)
    if (!pool) pools.set(url.origin, (pool = new Pool(url.origin, { connections: 128, keepAliveTimeout: 60_000 })))
    targets.set(header, (t = { pool, base: url.pathname.replace(/\/$/, '') }))
  }
  return t
}

function readAll(stream: NodeJS.ReadableStream, done: (body: Buffer) => void, fail: (err: Error) => void): void {
  const chunks: Buffer[] = []
  stream.on('data', (c: Buffer) => chunks.push(c))
  stream.on('end', () => done(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)))
  stream.on('error', fail)
}

const server = http.createServer((req, res) => {
  const fail = () => {
    if (!res.headersSent) res.writeHead(502, { 'content-length': 0 })
    res.end()
  }
  readAll(req, (body) => {
    const headers: Record<string, string> = {}
    let to: Target
    try {
      to = target(String(req.headers['svc-proxy-url']))
    } catch {
      return fail()
    }
    for (let i = 0; i < req.rawHeaders.length; i += 2) {
      const name = req.rawHeaders[i]!.toLowerCase()
      if (!HOP.has(name) && !name.startsWith('svc-')) headers[name] = req.rawHeaders[i + 1]!
    }
    const path = to.base + (req.url ?? '').slice('/proxy'.length) || '/'
    to.pool.request({ method: req.method as 'POST', path, headers, body: body.length ? body : null }).then((answer) => {
      readAll(answer.body, (payload) => {
        const out: Record<string, string | string[] | number> = {}
        for (const name in answer.headers) {
          const value = answer.headers[name]
          if (value !== undefined && !HOP.has(name)) out[name] = value
        }
        out['content-length'] = payload.length
        res.writeHead(answer.statusCode, out)
        res.end(payload)
      }, fail)
    }, fail)
  }, fail)
})
server.keepAliveTimeout = 65_000
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({ port: (server.address() as AddressInfo).port }) + '\n')
})
process.on('SIGTERM', () => process.exit(0))
