/**
 * Baseline (b) of the proxy bench: the cheapest correct forwarder, which every proxy ratio is
 * measured against. A node:http server reads the request body into one buffer, drops hop-by-hop
 * and `SVC-*` headers, sends it over a keep-alive undici Pool to the `SVC-PROXY-URL` origin,
 * reads the answer into one buffer and sends it back with `content-length`. Nothing else: the
 * destination is parsed once per distinct `SVC-PROXY-URL` value, not per request, and nothing is
 * streamed. Run as its own process, pinned like Tessera. Prints `{"port":N}` once listening.
 */
import http from 'node:http'
import { announce, answerHeaders, forwardedHeaders, readAll, target, targetPath, type Target } from './forward-target.js'

const server = http.createServer((req, res) => {
  const fail = () => {
    if (!res.headersSent) res.writeHead(502, { 'content-length': 0 })
    res.end()
  }
  readAll(req, (body) => {
    let to: Target
    try {
      to = target(String(req.headers['svc-proxy-url']))
    } catch {
      return fail()
    }
    to.pool.request({ method: req.method as 'POST', path: targetPath(to, req.url ?? ''), headers: forwardedHeaders(req.rawHeaders), body: body.length ? body : null }).then((answer) => {
      readAll(answer.body, (payload) => {
        const out: Record<string, string | string[] | number> = answerHeaders(answer.headers)
        out['content-length'] = payload.length
        res.writeHead(answer.statusCode, out)
        res.end(payload)
      }, fail)
    }, fail)
  }, fail)
})
server.keepAliveTimeout = 65_000
server.listen(0, '127.0.0.1', () => announce(server))
process.on('SIGTERM', () => process.exit(0))
