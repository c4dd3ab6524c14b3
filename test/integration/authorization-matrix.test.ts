import type { Test } from 'tap'
import t from 'tap'
import { startTestApp, type TestApp } from '../helpers/app.js'
import { bounded, containerGrants, dataUnder, sessionGrants, shown, TOKENS, type Decision, type Grant, type Tok } from '../helpers/authorization-model.js'
import { rawRequest } from '../helpers/proxy.js'
import { startStub, type Stub } from '../helpers/stub-server.js'
import { application } from '../helpers/tokens.js'

// Every route and bridge that shows token data x every kind of principal x generated rule
// shapes: each answer must carry exactly what the documented decision allows (so never more).

const REVEAL_ALL: Grant = { rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read', 'token:search', 'token:update', 'token:use', 'token:delete'] }], permissions: [] }
const BRIDGE = `module.exports = async (req) => {
  const out = {}
  for (const id of (req.args.ids || req.args.body.ids)) {
    try { out[id] = { ok: await req.svc.detokenize('{{ ' + id + ' }}') } } catch (e) { out[id] = { refused: String(e.message) } }
  }
  return req.args.ids ? { raw: out } : { body: out, headers: {}, status: 200 }
}`

interface Ctx {
  app: TestApp
  stub: Stub
  /** A private key holding plain token:use: invokes Reactors and require_auth proxies without adding grants of its own. */
  invoker: string
  /** Each token's fingerprint, as its writer saw it. */
  fingerprints: Map<string, string>
}

const holder = (app: TestApp, type: string, grant: Grant) => application(app, { type, ...grant })

const label = (grant: Grant) => JSON.stringify(grant.rules.map((r) => [r.container ?? r.conditions, r.transform, r.permissions])) + JSON.stringify(grant.permissions)

/** A value answer (detokenize, proxy, bridge): deny is refused; otherwise the data under the transform, null when redacted. */
function value(decision: Decision, token: Tok): unknown {
  return decision === undefined ? 'refused' : (dataUnder(decision, token) ?? null)
}

/** A token answer: data (and the fingerprint) exactly as the transform allows. */
function checkToken(t: Test, body: Record<string, unknown>, decision: Decision, token: Tok, what: string): void {
  if (decision === undefined) return void t.fail(`${what}: shown although no decision allows it`)
  t.same(body.data, dataUnder(decision, token), `${what}: data under ${decision}`)
  t.equal('fingerprint' in body, decision !== 'redact', `${what}: fingerprint only when not redacted`)
}

/** GET, list, search, detokenize and the PATCH answer, for a key acting with `grant` (bounded by `within` for sessions). */
async function readPaths(t: Test, { app, fingerprints }: Ctx, key: string, grant: Grant, within?: Grant): Promise<void> {
  for (const token of TOKENS) {
    // A fingerprint filter is an equality test too: it finds the token only where read shows it at least masked.
    const byFingerprint = await app.request('GET', `/v2/tokens?fingerprint=${fingerprints.get(token.id)}`, { key })
    const read = bounded(grant, 'token:read', token, within)
    if (byFingerprint.status === 403) t.ok(TOKENS.every((tok) => bounded(grant, 'token:read', tok, within) === undefined), `fingerprint of ${token.id} refused only without read`)
    else t.same(byFingerprint.body.data.map((x: { id: string }) => x.id), read === 'mask' || read === 'reveal' ? [token.id] : [], `fingerprint of ${token.id} under ${read}`)
    const get = await app.request('GET', `/tokens/${token.id}`, { key })
    if (read === undefined) t.equal(get.status, 403, `GET ${token.id}: 403`)
    else checkToken(t, get.body, read, token, `GET ${token.id}`)
    const detok = await app.request('POST', '/detokenize', { key, body: { v: `{{ ${token.id} }}` } })
    t.same(detok.status === 200 ? detok.body.v : 'refused', value(read, token), `detokenize ${token.id}`)
    // A `data:` term tests the plaintext: it matches only where the answer shows the token at
    // least masked (search and read both), as the fingerprint is shown.
    const byData = await app.request('POST', '/tokens/search', { key, body: { query: `data:${token.last4}` } })
    const search = shown(grant, 'token:search', token, within)
    if (byData.status === 403) t.ok(TOKENS.every((tok) => bounded(grant, 'token:search', tok, within) === undefined), `data:${token.last4} refused only without search`)
    else t.equal(byData.body.pagination.total_items, search === 'mask' || search === 'reveal' ? 1 : 0, `data:${token.last4} shown ${search}`)
    const update = await app.request('PATCH', `/tokens/${token.id}`, { key, rawBody: '{"metadata":{"m":"matrix"}}', headers: { 'content-type': 'application/merge-patch+json' } })
    if (bounded(grant, 'token:update', token, within) === undefined) t.equal(update.status, 403, `PATCH ${token.id}: 403`)
    else checkToken(t, update.body, shown(grant, 'token:update', token, within), token, `PATCH answer ${token.id}`)
  }
  for (const [permission, page] of [
    ['token:read', () => app.request('GET', '/tokens?metadata.m=matrix&size=100', { key })],
    ['token:search', () => app.request('POST', '/tokens/search', { key, body: { query: 'metadata.m:matrix', size: 100 } })],
  ] as const) {
    const res = await page()
    const expected = TOKENS.filter((tok) => bounded(grant, permission, tok, within) !== undefined)
    if (res.status === 403) {
      t.equal(expected.length, 0, `${permission} list refused only when nothing is in reach`)
      continue
    }
    t.same(res.body.data.map((x: { id: string }) => x.id).sort(), expected.map((tok) => tok.id).sort(), `${permission} lists exactly the tokens in reach`)
    for (const item of res.body.data) {
      const token = TOKENS.find((tok) => tok.id === item.id)!
      checkToken(t, item, shown(grant, permission, token, within), token, `${permission} item ${token.id}`)
    }
  }
}

/** The ephemeral proxy and Reactor args detokenize with the caller's token:use. */
async function usePaths(t: Test, { app, stub }: Ctx, key: string, grant: Grant, reactorId: string): Promise<void> {
  for (const token of TOKENS) {
    const use = bounded(grant, 'token:use', token)
    const proxied = await rawRequest(app.url, {
      method: 'POST',
      path: '/proxy',
      headers: ['SVC-API-KEY', key, 'SVC-PROXY-URL', stub.origin, 'Content-Type', 'application/json'],
      body: JSON.stringify({ v: `{{ ${token.id} }}` }),
    })
    t.same(proxied.status === 200 ? proxied.json.v : 'refused', value(use, token), `proxy ${token.id}`)
    const react = await app.request('POST', `/reactors/${reactorId}/react`, { key, body: { args: { v: `{{ ${token.id} }}` } } })
    t.same(react.status === 200 ? react.body.raw.v : 'refused', value(use, token), `Reactor args ${token.id}`)
  }
}

/** What runs as an Application: a Reactor's bridges, a proxy's response transform, and a require_auth false proxy key. */
async function actingPaths(t: Test, ctx: Ctx, grant: Grant): Promise<void> {
  const { app, stub, invoker } = ctx
  const actor = await holder(app, 'private', grant)
  const ids = TOKENS.map((tok) => tok.id)
  const expected = Object.fromEntries(TOKENS.map((tok) => [tok.id, value(bounded(grant, 'token:use', tok), tok)]))
  const outcome = (results: Record<string, { ok?: unknown; refused?: string }>) =>
    Object.fromEntries(Object.entries(results).map(([id, r]) => [id, 'ok' in r ? r.ok : 'refused']))

  const reactor = await app.request('POST', '/reactors', { body: { name: 'bridge', code: BRIDGE, application: { id: actor.id } } })
  const bridged = await app.request('POST', `/reactors/${reactor.body.id}/react`, { key: invoker, body: { args: { ids } } })
  t.same(outcome(bridged.body.raw), expected, 'Reactor Application bridges')

  const transformed = await app.request('POST', '/proxies', { body: { name: 't', destination_url: stub.origin, application: { id: actor.id }, response_transform: { code: BRIDGE } } })
  const res = await rawRequest(app.url, { method: 'POST', path: '/proxy', headers: ['SVC-PROXY-KEY', transformed.body.key, 'SVC-API-KEY', invoker, 'Content-Type', 'application/json'], body: JSON.stringify({ ids }) })
  t.same(outcome(res.json), expected, 'response transform bridges')

  const open = await app.request('POST', '/proxies', { body: { name: 'o', destination_url: stub.origin, application: { id: actor.id }, require_auth: false } })
  for (const token of TOKENS) {
    const sent = await rawRequest(app.url, { method: 'POST', path: '/proxy', headers: ['SVC-PROXY-KEY', open.body.key, 'Content-Type', 'application/json'], body: JSON.stringify({ v: `{{ ${token.id} }}` }) })
    t.same(sent.status === 200 ? sent.json.v : 'refused', expected[token.id], `proxy key ${token.id}`)
  }
}

t.test('authorization matrix', async (t) => {
  // Thousands of calls from one IP: the rate limits are not what is tested here.
  const unlimited = Object.fromEntries(['GLOBAL', 'TOKENS_SEARCH', 'TOKENS_LIST', 'TOKENS_CREATE'].map((s) => [`SVC_RATE_LIMIT_${s}`, '1000000/10']))
  const app = await startTestApp(t, { SVC_REACTOR_TIMEOUT_MS: '5000', ...unlimited })
  const stub = await startStub(t)
  const writer = await holder(app, 'private', REVEAL_ALL)
  const fingerprints = new Map<string, string>()
  for (const tok of TOKENS) {
    const index = tok.type === 'card' ? '{{ data.number | last4 }}' : '{{ data | last4 }}'
    const body = { id: tok.id, type: tok.type, data: tok.data, containers: tok.containers, metadata: { m: 'matrix' }, search_indexes: [index] }
    const res = await app.request('POST', '/tokens', { key: writer.key, body })
    if (res.status !== 201) throw new Error(`token: ${res.status} ${res.text}`)
    fingerprints.set(tok.id, res.body.fingerprint)
  }
  const echo = await app.request('POST', '/reactors', { body: { name: 'echo', code: 'module.exports = async (req) => ({ raw: req.args })' } })
  const ctx: Ctx = { app, stub, fingerprints, invoker: (await holder(app, 'private', { rules: [], permissions: ['token:use'] })).key }
  const issue7: Grant = {
    rules: [
      { priority: 1, container: '/pci/', transform: 'redact', permissions: ['token:read', 'token:use'] },
      { priority: 2, container: '/', transform: 'reveal', permissions: ['token:read', 'token:use', 'token:search'] },
    ],
    permissions: [],
  }
  const privateGrants = [issue7, REVEAL_ALL, ...containerGrants(['token:read', 'token:search', 'token:use', 'token:update'], 14, 12)]

  t.test('private Applications', async (t) => {
    for (const grant of privateGrants) {
      await t.test(label(grant), async (t) => {
        const { key } = await holder(app, 'private', grant)
        await readPaths(t, ctx, key, grant)
        await usePaths(t, ctx, key, grant, echo.body.id)
      })
    }
  })

  t.test('Applications acting for code and proxy keys', async (t) => {
    for (const grant of [issue7, ...containerGrants(['token:use'], 6, 16)]) await t.test(label(grant), (t) => actingPaths(t, ctx, grant))
  })

  t.test('create answers and deduplication', async (t) => {
    const created: string[] = []
    for (const grant of containerGrants(['token:create', 'token:read'], 10, 21)) {
      await t.test(label(grant), async (t) => {
        const { key } = await holder(app, 'private', grant)
        for (const token of TOKENS) {
          const body = { type: token.type, data: token.data, containers: token.containers }
          // Creating needs token:create on each container on its own.
          const creates = token.containers.every((c) => bounded(grant, 'token:create', { ...token, containers: [c] }) !== undefined)
          const expected = shown(grant, 'token:create', token)
          const tokenized = await app.request('POST', '/tokenize', { key, body: { c: body } })
          if (!creates) t.equal(tokenized.status, 403, `tokenize ${token.id}: 403`)
          else checkToken(t, tokenized.body.c, expected, token, `tokenize answer ${token.id}`)
          const dedup = await app.request('POST', '/tokens', { key, body: { ...body, deduplicate_token: true } })
          if (!creates) {
            t.equal(dedup.status, 403, `deduplicate ${token.id}: 403`)
            continue
          }
          checkToken(t, dedup.body, expected, token, `deduplicate answer ${token.id}`)
          // Returning the existing token says "this value is stored": only where its fingerprint shows.
          const existing = expected === 'mask' || expected === 'reveal'
          t.equal(dedup.body.id === token.id, existing, `deduplicate ${token.id} under ${expected}: ${existing ? 'the existing token' : 'a new one'}`)
          for (const id of [tokenized.body.c?.id, dedup.body.id]) if (id !== undefined && id !== token.id) created.push(id)
        }
      })
    }
    for (const id of created) await app.request('DELETE', `/tokens/${id}`, { key: writer.key })
  })

  t.test('public Applications: write answers never show data', async (t) => {
    for (const grant of containerGrants(['token:create', 'token:update'], 6, 13)) {
      const { key } = await holder(app, 'public', grant)
      for (const token of TOKENS) {
        const res = await app.request('PATCH', `/tokens/${token.id}`, { key, rawBody: '{"metadata":{"m":"matrix"}}', headers: { 'content-type': 'application/merge-patch+json' } })
        if (bounded(grant, 'token:update', token) === undefined) t.equal(res.status, 403, `${label(grant)} PATCH ${token.id}: 403`)
        else checkToken(t, res.body, 'redact', token, `${label(grant)} PATCH answer ${token.id}`)
        t.equal((await app.request('GET', `/tokens/${token.id}`, { key })).status, 403, 'no read')
      }
    }
  })

  t.test('sessions, bounded by their authorizer', async (t) => {
    const publicKey = (await holder(app, 'public', { rules: [{ priority: 1, container: '/', transform: 'redact', permissions: ['token:create'] }], permissions: [] })).key
    const narrowings = containerGrants(['token:read', 'token:search', 'token:update'], 8, 15)
    for (const [i, grant] of sessionGrants(['token:read', 'token:search', 'token:update'], 8, 3).entries()) {
      await t.test(label(grant), async (t) => {
        const authorizer = await holder(app, 'private', REVEAL_ALL)
        const session = await app.request('POST', '/sessions', { key: publicKey })
        const authorized = await app.request('POST', '/sessions/authorize', { key: authorizer.key, body: { nonce: session.body.nonce, ...grant } })
        t.equal(authorized.status, 200, 'within a reveal-all authorizer')
        await readPaths(t, ctx, session.body.session_key, grant, REVEAL_ALL)
        // Half of them: the authorizer is narrowed afterwards, and the session with it.
        if (i % 2 === 0) return
        const narrowed = narrowings[i]!
        const body = { name: 'narrowed', rules: narrowed.rules, ...(narrowed.permissions.length ? { permissions: narrowed.permissions } : {}) }
        t.equal((await app.request('PUT', `/applications/${authorizer.id}`, { body })).status, 200, 'narrowed')
        await readPaths(t, ctx, session.body.session_key, grant, narrowed)
      })
    }
  })

  t.test('management keys act on no token, whatever their ceiling', async (t) => {
    const token = TOKENS[0]!
    const calls = [
      app.request('GET', `/tokens/${token.id}`),
      app.request('GET', '/tokens'),
      app.request('POST', '/tokens/search', { body: { query: 'metadata.m:matrix' } }),
      app.request('POST', '/detokenize', { body: { v: `{{ ${token.id} }}` } }),
      app.request('POST', '/tokens', { body: { type: 'token', data: 'x' } }),
      app.request('POST', `/reactors/${echo.body.id}/react`, { body: { args: {} } }),
    ]
    for (const res of await Promise.all(calls)) t.equal(res.status, 403, `${res.status}: ${res.body?.detail}`)
    const proxied = await rawRequest(app.url, { method: 'POST', path: '/proxy', headers: ['SVC-API-KEY', app.adminKey, 'SVC-PROXY-URL', stub.origin], body: '{}' })
    t.equal(proxied.status, 403, 'proxy')
  })
})
