import t, { type Test } from 'tap'
import { startTestApp } from '../helpers/app.js'
import { startStub } from '../helpers/stub-server.js'
import { application } from '../helpers/tokens.js'

/**
 * The answer of `POST /reactors/{id}/react` goes to the caller as it is when the answer is
 * shaped, not as it was when it authenticated (README "Code and proxy keys act as their
 * Application"): a caller narrowed during the call sees the answer's tokens only as it may read
 * them now; a caller deleted during the call gets nothing (401). Each invocation is held in a
 * `fetch` to a stub until the test has changed the caller, then released.
 */

const PLAIN = 'NEW-PLAINTEXT'
const rule = (permissions: string[]) => [{ priority: 1, container: '/', transform: 'reveal', permissions }]

/** A stub that holds each request until the next `release`. */
async function holdingStub(t: Test): Promise<{ origin: string; reached(): Promise<void>; release(): void }> {
  let arrived: (() => void) | undefined
  let reached = new Promise<void>((r) => (arrived = r))
  const held: (() => void)[] = []
  const stub = await startStub(t, (_req, res) => {
    held.push(() => res.end('ok'))
    arrived?.()
  })
  return {
    origin: stub.origin,
    reached: () => reached,
    release() {
      for (const done of held.splice(0)) done()
      reached = new Promise<void>((r) => (arrived = r))
    },
  }
}

t.test('a caller that changes while its Reactor call runs', async (t) => {
  const app = await startTestApp(t)
  const stub = await holdingStub(t)
  const actor = await application(app, { type: 'private', rules: rule(['token:create', 'token:read']) })
  const wait = `await fetch('${stub.origin}/hold')`
  const reactor = async (answer: string) => {
    const res = await app.request('POST', '/reactors', { body: { name: 'r', code: `module.exports = async () => { ${wait}; return ${answer} }`, application: { id: actor.id } } })
    t.equal(res.status, 201, res.text)
    return res.body.id as string
  }
  const tokenizing = await reactor(`{ tokenize: { type: 'token', data: '${PLAIN}', containers: ['/general/'] } }`)
  const raw = await reactor(`{ raw: '${PLAIN}' }`)

  /** Calls `id` as a new caller, changes the caller while the call is held, answers. */
  async function during(t: Test, id: string, change: (caller: string) => Promise<{ status: number }>, expected: number) {
    const caller = await application(app, { type: 'private', rules: rule(['token:use', 'token:read']) })
    const call = app.request('POST', `/reactors/${id}/react`, { key: caller.key, body: { args: {} } })
    await stub.reached()
    t.equal((await change(caller.id)).status, expected, 'the change is made while the call is held')
    stub.release()
    return call
  }

  t.test('unchanged: the answer\'s token is shown with its data', async (t) => {
    const res = await during(t, tokenizing, (id) => app.request('GET', `/applications/${id}`), 200)
    t.equal(res.status, 200, res.text)
    t.equal(res.body.tokens.data, PLAIN)
  })

  t.test('token:read removed: the answer\'s token is redacted', async (t) => {
    const res = await during(t, tokenizing, (id) => app.request('PUT', `/applications/${id}`, { body: { name: 'test app', rules: rule(['token:use']) } }), 200)
    t.equal(res.status, 200, res.text)
    t.equal(res.body.tokens.data, undefined)
    t.notMatch(res.text, PLAIN)
  })

  t.test('deleted: no answer (401)', async (t) => {
    const res = await during(t, tokenizing, (id) => app.request('DELETE', `/applications/${id}`), 204)
    t.equal(res.status, 401, res.text)
    t.notMatch(res.text, PLAIN)
  })

  t.test('deleted, the Reactor answering raw: no answer either (401)', async (t) => {
    const res = await during(t, raw, (id) => app.request('DELETE', `/applications/${id}`), 204)
    t.equal(res.status, 401, res.text)
    t.notMatch(res.text, PLAIN)
  })

  t.test('its key regenerated (a leaked key replaced): no answer to the old key (401)', async (t) => {
    const res = await during(t, tokenizing, (id) => app.request('POST', `/applications/${id}/regenerate`), 200)
    t.equal(res.status, 401, res.text)
    t.notMatch(res.text, PLAIN)
  })

  t.test('token:use removed: no answer (403)', async (t) => {
    const res = await during(t, raw, (id) => app.request('PUT', `/applications/${id}`, { body: { name: 'test app', rules: rule(['token:read']) } }), 200)
    t.equal(res.status, 403, res.text)
    t.notMatch(res.text, PLAIN)
  })
})
