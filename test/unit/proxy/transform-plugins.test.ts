import { Readable } from 'node:stream'
import t from 'tap'
import type { Principal } from '../../../src/auth/principal.js'
import type { HostedCode, InvocationContext, ReactorOutcome } from '../../../src/reactors/code-host.js'
import { createPipeline, registerPlugin, type Exchange } from '../../../src/proxy/pipeline/index.js'
import { destinationHeadersPlugin } from '../../../src/proxy/plugins/destination-headers/index.js'
import { requestTransformPlugin, responseTransformPlugin, type TransformConfig } from '../../../src/proxy/plugins/transform/index.js'

const limits = { payloadMaxBytes: 64 }
const config: TransformConfig = { tenantId: 't1', reactorId: 'p:request', version: 'v1', code: 'module.exports = 1', configuration: { A: 'b' } }
const actor = { id: 'actor' } as Principal

function exchange(headers: string[], body: string): Exchange {
  return {
    principal: {} as Principal,
    actor,
    destination: { url: new URL('https://example.com'), origin: 'https://example.com', path: '/' },
    incoming: { method: 'POST', path: '/a', query: 'q=1', headers, body: Buffer.from(body) },
    outgoing: { headers, body: Buffer.from(body) },
    response: undefined,
    caller: { signal: new AbortController().signal },
  }
}

/** A code runner that records what it was given and answers with `outcome`. */
function runner(outcome: ReactorOutcome) {
  const seen: Array<{ code: HostedCode; args: unknown; context: InvocationContext }> = []
  return { seen, invoke: async (code: HostedCode, args: unknown, context: InvocationContext) => (seen.push({ code, args, context }), outcome) }
}

t.test('config is validated when registered (on save)', async (t) => {
  const plugin = requestTransformPlugin(runner({ kind: 'ok', value: {} }))
  t.throws(() => registerPlugin(plugin, { ...config, code: '' }), /invalid config/)
  t.throws(() => registerPlugin(plugin, { ...config, configuration: { A: 1 } } as never), /invalid config/)
  t.throws(() => registerPlugin(plugin, { ...config, extra: 1 } as never), /invalid config/)
})

t.test('request transform: args in, body and headers out; destination headers re-added', async (t) => {
  const r = runner({ kind: 'ok', value: { body: { n: 2 }, headers: { 'x-new': 'y', 'svc-proxy-connection': 'smuggled' } } })
  const pipeline = createPipeline([registerPlugin(requestTransformPlugin(r), config), registerPlugin(destinationHeadersPlugin(), {})])
  const ex = exchange(['Content-Type', 'application/json', 'SVC-API-KEY', 'secret', 'SVC-PROXY-KEEP-ALIVE', 'timeout=5', 'Host', 'h', 'X-Old', 'o'], '{"n":1}')
  t.equal(await pipeline.run('beforeForward', ex), undefined)
  t.same(r.seen[0]?.args, { body: { n: 1 }, headers: { 'content-type': 'application/json', 'x-old': 'o' }, method: 'POST', path: '/a', query: 'q=1' })
  t.same(r.seen[0]?.context, { actor, tokenRead: undefined }, 'acts as the proxy\'s Application')
  t.same(r.seen[0]?.code, config, 'runs the proxy\'s transform code')
    t.equal(String(ex.outgoing.body), '{"n":2}')
  t.same(ex.outgoing.headers, ['x-new', 'y', 'content-type', 'application/json', 'SVC-PROXY-KEEP-ALIVE', 'timeout=5'])
})

t.test('destination headers: untouched headers cost nothing', async (t) => {
  const ex = exchange(['A', 'b'], '')
  const before = ex.outgoing.headers
  await createPipeline([registerPlugin(destinationHeadersPlugin(), {})]).run('beforeForward', ex)
  t.equal(ex.outgoing.headers, before)
})

t.test('response transform: 2xx only, read within the payload limit', async (t) => {
  const r = runner({ kind: 'ok', value: { body: 'short', status: 202 } })
  const pipeline = createPipeline([registerPlugin(responseTransformPlugin(r, limits), config)])
  const ex = exchange([], '')
  ex.response = { status: 200, headers: { 'content-type': 'text/plain', 'content-length': '4', 'set-cookie': ['a=1', 'b=2'] }, body: Readable.from([Buffer.from('body')]) }
  const answer = await pipeline.run('afterForward', ex)
  t.same(r.seen[0]?.args, { body: 'body', headers: { 'content-type': 'text/plain', 'set-cookie': ['a=1', 'b=2'] }, status: 200 })
  t.match(answer, { status: 202, headers: { 'content-type': 'text/plain', 'set-cookie': ['a=1', 'b=2'], 'content-length': '5' } })
  t.equal(String(answer?.body), 'short')

  ex.response = { status: 404, headers: {}, body: Readable.from([]) }
  t.equal(await pipeline.run('afterForward', ex), undefined, 'a non-2xx answer is left alone')
  ex.response = { status: 200, headers: {}, body: Readable.from([Buffer.alloc(65)]) }
  await t.rejects(pipeline.run('afterForward', ex), { code: 'destination_unreachable' })
})

t.test('a transform value that is not an object is a reactor_error naming the expected shape', async (t) => {
  for (const value of [null, 'text', [1]]) {
    const request = createPipeline([registerPlugin(requestTransformPlugin(runner({ kind: 'ok', value })), config)])
    await t.rejects(request.run('beforeForward', exchange([], '')), { code: 'reactor_error', detail: 'The request transform returned a malformed value: it must be an object {body, headers}.' })
    const response = createPipeline([registerPlugin(responseTransformPlugin(runner({ kind: 'ok', value }), limits), config)])
    const ex = exchange([], '')
    ex.response = { status: 200, headers: {}, body: Readable.from([]) }
    await t.rejects(response.run('afterForward', ex), { code: 'reactor_error', detail: 'The response transform returned a malformed value: it must be an object {body, headers, status}.' })
  }
})

t.test('a CustomHttpResponseError answers the caller from either transform', async (t) => {
  const thrown: ReactorOutcome = { kind: 'response', status: 418, headers: { 'x-a': 'b' }, body: { no: true } }
  const request = createPipeline([registerPlugin(requestTransformPlugin(runner(thrown)), config)])
  t.match(await request.run('beforeForward', exchange([], '')), { status: 418, headers: { 'x-a': 'b', 'content-type': 'application/json' } })
})
