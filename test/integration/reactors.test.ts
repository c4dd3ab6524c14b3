import { readFileSync } from 'node:fs'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { startTestApp } from '../helpers/app.js'
import { appKey, card, VISA } from '../helpers/tokens.js'

const example = (name: string) => readFileSync(new URL(`../../reactors/${name}.js`, import.meta.url), 'utf8')

t.test('Reactors API', async (t) => {
  const app = await startTestApp(t, { SVC_REACTOR_TIMEOUT_MS: '2000' })
  const caller = await appKey(app, {
    type: 'private',
    rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read', 'token:use'] }],
  })
  const actor = await app.request('POST', '/applications', {
    body: { name: 'reactor actor', type: 'private', rules: [{ priority: 1, container: '/', transform: 'mask', permissions: ['token:create', 'token:use'] }] },
  })

  t.test('create, get, list, update, delete with validation', async (t) => {
    const created = await app.request('POST', '/reactors', { body: { name: 'echo', code: example('echo'), configuration: { A: 'b' } } })
    t.equal(created.status, 201)
    t.match(created.body, { name: 'echo', configuration: { A: 'b' } })
    const id = created.body.id
    t.equal((await app.request('GET', `/reactors/${id}`)).body.name, 'echo')
    t.equal((await app.request('GET', '/reactors')).body.pagination.total_items, 1)
    const compileError = await app.request('POST', '/reactors', { body: { name: 'bad', code: 'module.exports = async function () {\n  return 1 +* 2\n}' } })
    t.equal(compileError.status, 422)
    t.match(compileError.body.detail, /SyntaxError/)
    t.match(compileError.body.detail, /line 2/i, 'with the position')
    const tooLong = await app.request('POST', '/reactors', { body: { name: 'long', code: `// ${'x'.repeat(50_000)}` } })
    t.equal(tooLong.status, 400)
    t.ok(tooLong.body.errors.code)
    const badConfig = await app.request('POST', '/reactors', { body: { name: 'c', code: example('echo'), configuration: { A: 1 } } })
    t.equal(badConfig.status, 400)
    const badApp = await app.request('POST', '/reactors', { body: { name: 'c', code: example('echo'), application: { id: '00000000-0000-4000-8000-000000000000' } } })
    t.equal(badApp.status, 400)
    const updated = await app.request('PUT', `/reactors/${id}`, { body: { name: 'echo2', code: 'module.exports = async (req) => ({ raw: "v2" })' } })
    t.equal(updated.status, 200)
    const reacted = await app.request('POST', `/reactors/${id}/react`, { key: caller, body: { args: {} } })
    t.same(reacted.body, { raw: 'v2' }, 'saving new code retires the old')
    t.equal((await app.request('DELETE', `/reactors/${id}`)).status, 204)
    t.equal((await app.request('GET', `/reactors/${id}`)).status, 404)
    t.equal((await app.request('POST', `/reactors/${id}/react`, { key: caller, body: { args: {} } })).status, 404)
  })

  t.test('react: detokenized args, card brand, tokenize, permissions, limits', async (t) => {
    const tok = await app.request('POST', '/tokens', { key: caller, body: { type: 'card', data: card() } })
    const brand = await app.request('POST', '/reactors', { body: { name: 'brand', code: example('card-brand') } })
    const res = await app.request('POST', `/reactors/${brand.body.id}/react`, { key: caller, body: { args: { card: `{{ ${tok.body.id} }}` } } })
    t.equal(res.status, 200)
    t.match(res.body.raw, { brand: 'visa', last4: '4242' })
    t.notMatch(JSON.stringify(res.body), VISA)

    const mgmtCannot = await app.request('POST', `/reactors/${brand.body.id}/react`, { body: { args: {} } })
    t.equal(mgmtCannot.status, 403, 'a management key cannot invoke')
    const noUse = await appKey(app, { type: 'private', permissions: ['token:read'] })
    t.equal((await app.request('POST', `/reactors/${brand.body.id}/react`, { key: noUse, body: { args: {} } })).status, 403)
    t.equal((await app.request('POST', `/reactors/${brand.body.id}/react`, { key: caller, body: { args: { card: '{{ nope-token }}' } } })).status, 400)
    const bad = await app.request('POST', `/reactors/${brand.body.id}/react`, { key: caller, body: { args: { card: 'x' } } })
    t.equal(bad.status, 400, 'BadRequestError is a 400')

    const tokenizer = await app.request('POST', '/reactors', {
      body: { name: 't', code: 'module.exports = async (req) => ({ raw: "ok", tokenize: { n: req.args.n } })', application: { id: actor.body.id } },
    })
    const tokenized = await app.request('POST', `/reactors/${tokenizer.body.id}/react`, { key: caller, body: { args: { n: 'secret-value' } } })
    t.equal(tokenized.status, 200)
    t.type(tokenized.body.tokens.n, 'string')
    const back = await app.request('GET', `/tokens/${tokenized.body.tokens.n}`, { key: caller })
    t.equal(back.body.data, 'secret-value')
    t.equal(back.body.created_by, actor.body.id, 'tokenized as the Reactor Application')

    const big = await app.request('POST', `/reactors/${brand.body.id}/react`, {
      key: caller,
      rawBody: JSON.stringify({ args: { pad: 'x'.repeat(5 * 1024 * 1024) } }),
      headers: { 'content-type': 'application/json' },
    })
    t.equal(big.status, 413)
  })

  t.test('custom responses, errors and fetch under the destination policy', async (t) => {
    const dest = http.createServer((req, res) => {
      res.setHeader('content-type', 'application/json')
      res.end(JSON.stringify({ number: VISA, exp_month: 1, exp_year: 2031, cvc: '321' }))
    })
    await new Promise<void>((r) => dest.listen(0, '127.0.0.1', r))
    t.teardown(() => dest.close())
    const url = `http://127.0.0.1:${(dest.address() as AddressInfo).port}`
    const issuer = await app.request('POST', '/reactors', {
      body: { name: 'issuer', code: example('tokenize-response'), configuration: { ISSUER_API_URL: url }, application: { id: actor.body.id } },
    })
    const res = await app.request('POST', `/reactors/${issuer.body.id}/react`, { key: caller, body: { args: { holder: 'Ada' } } })
    t.equal(res.status, 200)
    t.match(res.body, { raw: { issued: true }, tokens: { card: { id: String, type: 'card' } } })
    t.notMatch(JSON.stringify(res.body), VISA, 'the card leaves only as a token')

    const custom = await app.request('POST', '/reactors', {
      body: { name: 'c', code: 'module.exports = async () => { throw new CustomHttpResponseError({ status: 418, headers: { "x-r": "1" }, body: { tea: true } }) }' },
    })
    const teapot = await app.request('POST', `/reactors/${custom.body.id}/react`, { key: caller, body: { args: {} } })
    t.equal(teapot.status, 418)
    t.equal(teapot.headers.get('x-r'), '1')
    t.same(teapot.body, { tea: true })

    const thrower = await app.request('POST', '/reactors', { body: { name: 'e', code: 'module.exports = async () => { throw new Error("card declined by rule 7") }' } })
    const failed = await app.request('POST', `/reactors/${thrower.body.id}/react`, { key: caller, body: { args: {} } })
    t.equal(failed.status, 500)
    t.match(failed.body.detail, /card declined by rule 7/)
    t.equal(failed.headers.get('content-type'), 'application/problem+json')

    const looper = await app.request('POST', '/reactors', { body: { name: 'l', code: 'module.exports = async () => { while (true) {} }' } })
    const timedOut = await app.request('POST', `/reactors/${looper.body.id}/react`, { key: caller, body: { args: {} } })
    t.equal(timedOut.status, 504)
    const echo = await app.request('POST', '/reactors', { body: { name: 'echo', code: example('echo') } })
    t.same((await app.request('POST', `/reactors/${echo.body.id}/react`, { key: caller, body: { args: { a: 1 } } })).body, { raw: { a: 1 } }, 'the next invocation succeeds')
  })
})

t.test('cached Reactors: an update, a delete or an Application change takes effect at once', async (t) => {
  const app = await startTestApp(t)
  const caller = await appKey(app, { type: 'private', permissions: ['token:use'] })
  const react = (id: string) => app.request('POST', `/reactors/${id}/react`, { key: caller, body: { args: {} } })
  const code = (v: string) => `module.exports = async (req) => ({ raw: ["${v}", req.configuration.C] })`

  const r = await app.request('POST', '/reactors', { body: { name: 'v', code: code('v1'), configuration: { C: 'a' } } })
  t.same((await react(r.body.id)).body, { raw: ['v1', 'a'] })
  t.same((await react(r.body.id)).body, { raw: ['v1', 'a'] }, 'served from the cache')
  t.equal((await app.request('PUT', `/reactors/${r.body.id}`, { body: { name: 'v', code: code('v2'), configuration: { C: 'a' } } })).status, 200)
  t.same((await react(r.body.id)).body, { raw: ['v2', 'a'] }, 'the next call runs the new code')
  t.equal((await app.request('PUT', `/reactors/${r.body.id}`, { body: { name: 'v', code: code('v2'), configuration: { C: 'b' } } })).status, 200)
  t.same((await react(r.body.id)).body, { raw: ['v2', 'b'] }, 'a new configuration with the same code')
  t.equal((await app.request('DELETE', `/reactors/${r.body.id}`)).status, 204)
  t.equal((await react(r.body.id)).status, 404, 'a deleted Reactor is gone at once')

  // Uuids match in any case; the cache must not keep one entry per spelling.
  const cased = await app.request('POST', '/reactors', { body: { name: 'c', code: code('c1'), configuration: { C: 'a' } } })
  const upper = (cased.body.id as string).toUpperCase()
  t.same((await react(upper)).body, { raw: ['c1', 'a'] }, 'an upper-case id runs it')
  t.equal((await app.request('PUT', `/reactors/${cased.body.id}`, { body: { name: 'c', code: code('c2'), configuration: { C: 'a' } } })).status, 200)
  t.same((await react(upper)).body, { raw: ['c2', 'a'] }, 'and runs the new code after an update by the lower-case id')
  t.equal((await app.request('PUT', `/reactors/${upper}`, { body: { name: 'c', code: code('c3'), configuration: { C: 'a' } } })).status, 200)
  t.same((await react(cased.body.id)).body, { raw: ['c3', 'a'] }, 'an update by the upper-case id reaches the lower-case one')
  t.equal((await app.request('DELETE', `/reactors/${upper}`)).status, 204)
  t.equal((await react(cased.body.id)).status, 404, 'a delete by either spelling ends both')
  t.equal((await react(upper)).status, 404)

  // The Application a Reactor acts as is cached with it: its changes count at once too.
  const actor = await app.request('POST', '/applications', {
    body: { name: 'actor', type: 'private', rules: [{ priority: 1, container: '/', transform: 'mask', permissions: ['token:create', 'token:use'] }] },
  })
  const tokenizer = await app.request('POST', '/reactors', {
    body: { name: 't', code: 'module.exports = async () => ({ raw: "ok", tokenize: { n: "secret" } })', application: { id: actor.body.id } },
  })
  t.equal((await react(tokenizer.body.id)).status, 200)
  t.equal((await react(tokenizer.body.id)).status, 200)
  const narrowed = await app.request('PUT', `/applications/${actor.body.id}`, {
    body: { name: 'actor', rules: [{ priority: 1, container: '/', transform: 'mask', permissions: ['token:use'] }] },
  })
  t.equal(narrowed.status, 200)
  t.equal((await react(tokenizer.body.id)).status, 403, 'the narrowed grants apply to the next call')
  t.equal((await app.request('DELETE', `/applications/${actor.body.id}`)).status, 204)
  const orphan = await react(tokenizer.body.id)
  t.equal(orphan.status, 403)
  t.match(orphan.body.detail, /no Application/, 'a deleted Application no longer acts')

  if (!app.config.databaseUrl) return
  // Another process on the same database hears about changes by NOTIFY.
  const other = await startTestApp(t, {}, { reuse: app })
  const otherReact = (id: string) => other.request('POST', `/reactors/${id}/react`, { key: caller, body: { args: {} } })
  const shared = await app.request('POST', '/reactors', { body: { name: 's', code: code('s1'), configuration: { C: 'x' } } })
  t.same((await otherReact(shared.body.id)).body, { raw: ['s1', 'x'] })
  await app.request('PUT', `/reactors/${shared.body.id}`, { body: { name: 's', code: code('s2'), configuration: { C: 'x' } } })
  const until = async (check: () => Promise<boolean>) => {
    for (let i = 0; i < 100 && !(await check()); i++) await new Promise((r) => setTimeout(r, 20))
    return check()
  }
  t.ok(await until(async () => (await otherReact(shared.body.id)).body?.raw?.[0] === 's2'), 'the other process runs the new code')
  await app.request('DELETE', `/reactors/${shared.body.id}`)
  t.ok(await until(async () => (await otherReact(shared.body.id)).status === 404), 'and forgets the deleted Reactor')
})

t.test('fetch refuses private destinations under the default policy', async (t) => {
  const app = await startTestApp(t, { SVC_PROXY_ALLOW_PRIVATE: 'false', SVC_PROXY_ALLOW_HTTP: 'false' })
  const caller = await appKey(app, { type: 'private', permissions: ['token:use'] })
  const r = await app.request('POST', '/reactors', {
    body: { name: 'f', code: 'module.exports = async () => { try { await fetch("https://127.0.0.1:9/x"); return { raw: "fetched" } } catch (e) { return { raw: String(e.message) } } }' },
  })
  const res = await app.request('POST', `/reactors/${r.body.id}/react`, { key: caller, body: { args: {} } })
  t.equal(res.status, 200)
  t.not(res.body.raw, 'fetched')
  t.match(res.body.raw, /not allowed|refused|public/i)
})

t.test('a bridge answer over the payload limit is the Reactor\'s error, not the runtime\'s end', async (t) => {
  // 30,000 control characters pass the fetch bound (64 KB) but are six bytes each in JSON: the
  // answer's frame was larger than the worker takes, and the worker died with every call in it.
  const server = http.createServer((_req, res) => res.end(Buffer.alloc(30_000, 1)))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise((resolve) => server.close(resolve)))
  const app = await startTestApp(t, { SVC_REACTOR_PAYLOAD_MAX_BYTES: String(64 * 1024) })
  const caller = await appKey(app, { type: 'private', permissions: ['token:use'] })
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`
  const code = `module.exports = async () => { try { return { raw: (await fetch('${url}')).body.length } } catch (e) { return { raw: e.message } } }`
  const reactor = await app.request('POST', '/reactors', { body: { name: 'escaped', code } })
  const res = await app.request('POST', `/reactors/${reactor.body.id}/react`, { key: caller, body: { args: {} } })
  t.equal(res.status, 200)
  t.match(res.body.raw, /answer of fetch is larger than the 65536-byte Reactor payload limit/)
  t.equal(app.services.supervisor.stats().restarts, 0, 'the runtime was not restarted')
})

t.test('what a Reactor answers with is checked like anything else it hands back', async (t) => {
  const app = await startTestApp(t)
  const caller = await appKey(app, { type: 'private', permissions: ['token:use'] })
  const react = async (code: string) => {
    const reactor = await app.request('POST', '/reactors', { body: { name: 'r', code } })
    return app.request('POST', `/reactors/${reactor.body.id}/react`, { key: caller, body: { args: {} }, headers: { 'SVC-TRACE-ID': 'mine' } })
  }

  t.test('CustomHttpResponseError: framing, hop-by-hop and SVC-* headers are not set', async (t) => {
    const headers = "{ 'transfer-encoding': 'chunked', 'content-length': '3', connection: 'upgrade', upgrade: 'h2c', trailer: 'x-a', 'svc-trace-id': 'forged', 'x-kept': '1' }"
    const res = await react(`module.exports = async () => { throw new CustomHttpResponseError({ status: 202, headers: ${headers}, body: 'hello' }) }`)
    t.equal(res.status, 202)
    t.equal(res.text, 'hello', 'framed by Tessera')
    t.equal(res.headers.get('content-length'), '5')
    t.equal(res.headers.get('transfer-encoding'), null)
    t.equal(res.headers.get('upgrade'), null)
    t.equal(res.headers.get('trailer'), null)
    t.equal(res.headers.get('svc-trace-id'), 'mine')
    t.equal(res.headers.get('x-kept'), '1')
  })

  t.test('a result nested deeper than 512 levels is a reactor_error, never a plain-text 500', async (t) => {
    const deep = (n: number) => `(() => { let a = 'x'; for (let i = 0; i < ${n}; i++) a = [a]; return a })()`
    t.equal((await react(`module.exports = async () => ({ raw: ${deep(500)} })`)).status, 200, '500 levels are fine')
    for (const field of ['raw', 'tokenize']) {
      const res = await react(`module.exports = async () => ({ ${field}: ${deep(9000)} })`)
      t.equal(res.status, 500, field)
      t.match(res.body, { type: '/problems/reactor-error', detail: /nested more than 512 levels/ }, `${field}: problem+json`)
    }
    const thrown = await react(`module.exports = async () => { throw new CustomHttpResponseError({ status: 200, body: ${deep(9000)} }) }`)
    t.match(thrown.body, { type: '/problems/reactor-error' }, 'a CustomHttpResponseError body too')
  })
})
