/**
 * Variant (k) of the proxy bench: the baseline forwarder (b) built on Tessera's HTTP stack, Koa
 * with one middleware, and nothing else Tessera does (no authentication, limiter, policy,
 * templates, metrics or audit log). What it costs over (b) is the stack's share of every Tessera
 * variant; what (c) costs over it is Tessera's own per-call work. Not a baseline for any target.
 * Run as its own process, pinned like Tessera. Prints `{"port":N}` once listening.
 */
import Koa from 'koa'
import { announce, answerHeaders, forwardedHeaders, readAll, target, targetPath, type Target } from './forward-target.js'

const read = (stream: NodeJS.ReadableStream) => new Promise<Buffer>((resolve, reject) => readAll(stream, resolve, reject))

const app = new Koa()
app.use(async (ctx) => {
  const body = await read(ctx.req)
  let to: Target
  try {
    to = target(ctx.get('svc-proxy-url'))
  } catch {
    ctx.status = 502
    return
  }
  const answer = await to.pool.request({ method: ctx.method as 'POST', path: targetPath(to, ctx.url), headers: forwardedHeaders(ctx.req.rawHeaders), body: body.length ? body : null })
  const payload = await read(answer.body)
  ctx.status = answer.statusCode
  ctx.set(answerHeaders(answer.headers))
  // A Buffer body: Koa sends it with its content-length.
  ctx.body = payload
})
const server = app.listen(0, '127.0.0.1', () => announce(server))
server.keepAliveTimeout = 65_000
process.on('SIGTERM', () => process.exit(0))
