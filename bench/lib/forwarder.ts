/**
 * Baseline (b) of the proxy bench: the least a forwarding proxy must do. A node:http server that
 * reads the body, drops hop-by-hop and `SVC-*` headers, forwards to the `SVC-PROXY-URL` origin
 * over a keep-alive undici Pool and streams the answer back. Run as its own process, pinned like
 * Tessera. Prints `{"port":N}` once listening.
 */
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { pipeline } from 'node:stream'
import { Pool } from 'undici'

const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'host', 'content-length'])
const pools = new Map<string, Pool>()

function pool(origin: string): Pool {
  let p = pools.get(origin)
  if (!p) pools.set(origin, (p = new Pool(origin, { connections: 128, keepAliveTimeout: 60_000 })))
  return p
}

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = []
  req.on('data', (c: Buffer) => chunks.push(c))
  req.on('end', () => {
    const target = new URL(String(req.headers['svc-proxy-url']))
    const headers: Record<string, string> = {}
    for (let i = 0; i < req.rawHeaders.length; i += 2) {
      const name = req.rawHeaders[i]!.toLowerCase()
      if (!HOP.has(name) && !name.startsWith('svc-')) headers[name] = req.rawHeaders[i + 1]!
    }
    const body = Buffer.concat(chunks)
    const path = target.pathname.replace(/\/$/, '') + (req.url ?? '').slice('/proxy'.length) || '/'
    pool(target.origin)
      .request({ method: req.method as 'POST', path, headers, body: body.length ? body : null })
      .then((answer) => {
        const out: Record<string, string | string[]> = {}
        for (const [name, value] of Object.entries(answer.headers)) if (value !== undefined && !HOP.has(name)) out[name] = value
        res.writeHead(answer.statusCode, out)
        pipeline(answer.body, res, () => {})
      })
      .catch(() => {
        res.writeHead(502).end()
      })
  })
})
server.keepAliveTimeout = 65_000
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({ port: (server.address() as AddressInfo).port }) + '\n')
})
process.on('SIGTERM', () => process.exit(0))
