import t, { type Test } from 'tap'
import { startTestApp, type TestApp } from '../helpers/app.js'
import { rawRequest } from '../helpers/proxy.js'
import { startStub, type Stub } from '../helpers/stub-server.js'
import { appKey, createToken } from '../helpers/tokens.js'

/**
 * Code acts as its bound Application as that Application is at each bridge call, not as it was
 * when the invocation began (README "Code and proxy keys act as their Application"): deleted
 * mid-invocation, the code's next token access is refused; narrowed, it reads only what the new
 * grants allow; with a new key, it goes on as before. Each invocation is held in a `fetch` to a
 * stub until the test has changed the Application, then released.
 */

const SECRET = 'SECRET-PLAINTEXT'
const GENERAL = 'GENERAL-PLAINTEXT'
const useEverywhere = [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:use', 'token:create'] }]
const useGeneral = [{ priority: 1, container: '/general/', transform: 'reveal', permissions: ['token:use', 'token:create'] }]

/** A stub that holds `/hold/<n>` until released, and records whatever else reaches it. */
async function holdingStub(t: Test): Promise<{ stub: Stub; gate(): { path: string; reached: Promise<void>; release(): void }; received: string[] }> {
  const gates = new Map<string, { arrived(): void; held: Promise<void> }>()
  const received: string[] = []
  const stub = await startStub(t, (req, res, body) => {
    const gate = gates.get(req.url ?? '')
    if (gate === undefined) {
      received.push(body.toString())
      res.end('{}')
      return
    }
    gate.arrived()
    void gate.held.then(() => res.end('ok'))
  })
  let n = 0
  return {
    stub,
    received,
    gate() {
      const path = `/hold/${++n}`
      let arrived!: () => void
      let release!: () => void
      const reached = new Promise<void>((r) => (arrived = r))
      const held = new Promise<void>((r) => (release = r))
      gates.set(path, { arrived, held })
      return { path, reached, release }
    },
  }
}

async function actor(app: TestApp, rules = useEverywhere): Promise<string> {
  const res = await app.request('POST', '/applications', { body: { name: 'actor', type: 'private', rules } })
  if (res.status !== 201) throw new Error(`creating the actor failed: ${res.status} ${res.text}`)
  return res.body.id as string
}

/** Code that waits at the gate, then reads each token on its own and reports what it got or why not. */
function readingCode(origin: string, path: string, ids: string[]): string {
  return `module.exports = async (req) => {
    await fetch('${origin}${path}')
    const out = []
    for (const id of ${JSON.stringify(ids)}) {
      try { out.push(await req.svc.detokenize('{{ ' + id + ' }}')) } catch (e) { out.push('refused: ' + e.message) }
    }
    return { raw: out }
  }`
}

t.test('a Reactor whose Application changes during an invocation', async (t) => {
  const app = await startTestApp(t)
  const writer = await appKey(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read'] }] })
  const pci = await createToken(app, writer, { type: 'token', data: SECRET, containers: ['/pci/'] })
  const general = await createToken(app, writer, { type: 'token', data: GENERAL, containers: ['/general/'] })
  const caller = await appKey(app, { type: 'private', permissions: ['token:use'] })
  const { stub, gate } = await holdingStub(t)

  /** Starts an invocation of `code` (bound to `actorId`), waits until it is held, changes, releases, answers. */
  async function during(t: Test, code: (path: string) => string, actorId: string, change: () => Promise<{ status: number }>, expected: number) {
    const g = gate()
    const reactor = await app.request('POST', '/reactors', { body: { name: 'r', code: code(g.path), application: { id: actorId } } })
    t.equal(reactor.status, 201, reactor.text)
    const call = app.request('POST', `/reactors/${reactor.body.id}/react`, { key: caller, body: { args: {} } })
    await g.reached
    t.equal((await change()).status, expected, 'the change is made while the invocation is held')
    g.release()
    return call
  }

  t.test('deleted: the next bridge call is refused (403), nothing is read', async (t) => {
    const id = await actor(app)
    const res = await during(t, (path) => readingCode(stub.origin, path, [pci, general]), id, () => app.request('DELETE', `/applications/${id}`), 204)
    t.equal(res.status, 200, res.text)
    t.same(res.body.raw, ['refused: The Reactor has no Application to act as.', 'refused: The Reactor has no Application to act as.'])
    t.notMatch(res.text, /PLAINTEXT/)
  })

  t.test('narrowed to /general/: reads what the new grants allow, and no more', async (t) => {
    const id = await actor(app)
    const res = await during(t, (path) => readingCode(stub.origin, path, [pci, general]), id, () => app.request('PUT', `/applications/${id}`, { body: { name: 'actor', rules: useGeneral } }), 200)
    t.equal(res.status, 200, res.text)
    t.same(res.body.raw, [`refused: The key lacks token:use on token ${pci}.`, GENERAL])
  })

  t.test('deleted: a `{ tokenize }` answer stores nothing (403)', async (t) => {
    const id = await actor(app)
    const code = (path: string) => `module.exports = async () => { await fetch('${stub.origin}${path}'); return { tokenize: { type: 'token', data: 'NEW-PLAINTEXT', containers: ['/general/'] } } }`
    const res = await during(t, code, id, () => app.request('DELETE', `/applications/${id}`), 204)
    t.equal(res.status, 403, res.text)
    t.notMatch(res.text, /PLAINTEXT/)
  })

  t.test('a new key: still the same Application, the invocation goes on with its grants', async (t) => {
    const id = await actor(app)
    const res = await during(t, (path) => readingCode(stub.origin, path, [pci]), id, () => app.request('POST', `/applications/${id}/regenerate`), 200)
    t.equal(res.status, 200, res.text)
    t.same(res.body.raw, [SECRET])
  })
})

t.test('a pre-configured proxy (require_auth: false) whose Application is deleted while its request transform runs', async (t) => {
  const app = await startTestApp(t)
  const writer = await appKey(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create'] }] })
  const pci = await createToken(app, writer, { type: 'token', data: SECRET, containers: ['/pci/'] })
  const { stub, gate, received } = await holdingStub(t)

  /** Calls a proxy whose request transform waits at a gate, then returns `then`; deletes its Application meanwhile. */
  async function during(t: Test, then: string) {
    const id = await actor(app)
    const g = gate()
    const code = `module.exports = async (req) => { await fetch('${stub.origin}${g.path}'); ${then} }`
    const proxy = await app.request('POST', '/proxies', { body: { name: 'p', destination_url: stub.origin, require_auth: false, request_transform: { code }, application: { id } } })
    t.equal(proxy.status, 201, proxy.text)
    const call = rawRequest(app.url, { method: 'POST', path: '/proxy/dest', body: '{}', headers: ['SVC-PROXY-KEY', proxy.body.key as string, 'Content-Type', 'application/json'] })
    await g.reached
    t.equal((await app.request('DELETE', `/applications/${id}`)).status, 204)
    g.release()
    return call
  }

  t.test('its req.svc.detokenize is refused, and the call ends as a new one would (403)', async (t) => {
    received.length = 0
    // What the bridge gave the code, the code sends on with its own fetch.
    const res = await during(t, `let v; try { v = await req.svc.detokenize('{{ ${pci} }}') } catch (e) { v = 'refused: ' + e.message } await fetch('${stub.origin}/seen', { method: 'POST', body: v }); return { body: { v } }`)
    t.equal(res.status, 403, res.body.toString())
    t.same(received, ['refused: The Reactor has no Application to act as.'], 'the bridge refused; the destination got nothing')
  })

  t.test('an expression it returns is not detokenized as the deleted Application: nothing is forwarded (403)', async (t) => {
    received.length = 0
    const res = await during(t, `return { body: { v: '{{ ${pci} }}' } }`)
    t.equal(res.status, 403, res.body.toString())
    t.notMatch(res.body.toString(), /PLAINTEXT/)
    t.same(received, [], 'nothing reached the destination')
  })
})

// The Application is deleted on another process: that process's cached actor goes by NOTIFY, so
// "at once" there means as soon as it read the notification. The held invocation is released only
// once a second Reactor on the same process, bound to the same Application, is refused.
t.test('deleted on another process while an invocation runs', { skip: process.env.DATABASE_URL ? false : 'needs DATABASE_URL (PGlite is one process)' }, async (t) => {
  const a = await startTestApp(t)
  const b = await startTestApp(t, {}, { reuse: a })
  const writer = await appKey(a, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create'] }] })
  const pci = await createToken(a, writer, { type: 'token', data: SECRET, containers: ['/pci/'] })
  const caller = await appKey(a, { type: 'private', permissions: ['token:use'] })
  const { stub, gate } = await holdingStub(t)
  const id = await actor(a)
  const g = gate()
  const held = await a.request('POST', '/reactors', { body: { name: 'held', code: readingCode(stub.origin, g.path, [pci]), application: { id } } })
  const probe = await a.request('POST', '/reactors', { body: { name: 'probe', code: `module.exports = async (req) => { try { return { raw: await req.svc.detokenize('{{ ${pci} }}') } } catch (e) { return { raw: 'refused' } } }`, application: { id } } })
  const react = (reactor: { body: { id: string } }) => b.request('POST', `/reactors/${reactor.body.id}/react`, { key: caller, body: { args: {} } })
  t.equal((await react(probe)).body.raw, SECRET, 'process b acts as the Application (and caches it)')
  const call = react(held)
  await g.reached
  t.equal((await a.request('DELETE', `/applications/${id}`)).status, 204, 'deleted on process a')
  const deadline = Date.now() + 5000
  while ((await react(probe)).body.raw !== 'refused' && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
  g.release()
  const res = await call
  t.same(res.body.raw, ['refused: The Reactor has no Application to act as.'], res.text)
})
