import t from 'tap'
import { startTestApp, type TestApp } from '../helpers/app.js'
import { appKey, card } from '../helpers/tokens.js'

// Sessions are cached with the principal of their key: a change to the Applications behind
// them, made in one process, must reach the other process's cache. It travels by Postgres
// NOTIFY, which the other process reads from its own connection, so "at once" means as soon as
// that notification is read: the checks wait for it (up to 5 s) rather than race it.
t.test('sessions follow their Applications on every process', { skip: process.env.DATABASE_URL ? false : 'needs DATABASE_URL (PGlite is one process)' }, async (t) => {
  const a = await startTestApp(t)
  const b = await startTestApp(t, {}, { reuse: a })
  const writer = await appKey(a, { type: 'private', permissions: ['token:create'] })
  const tok = await a.request('POST', '/tokens', { key: writer, body: { type: 'card', data: card() } })
  const id = tok.body.id as string

  const app = async (body: object) => (await a.request('POST', '/applications', { body: { name: 'x', ...body } })).body as { id: string; key: string }
  const session = async (publicKey: string, privateKey: string) => {
    const s = await a.request('POST', '/sessions', { key: publicKey })
    const rules = [{ priority: 1, conditions: [{ attribute: 'id', operator: 'equals', value: id }], transform: 'reveal', permissions: ['token:read'] }]
    t.equal((await a.request('POST', '/sessions/authorize', { key: privateKey, body: { nonce: s.body.nonce, rules } })).status, 200)
    const key = s.body.session_key as string
    t.same((await b.request('GET', `/tokens/${id}`, { key })).body.data, card(), 'the other process reads (and caches) the session')
    return key
  }
  const read = (process: TestApp, key: string) => process.request('GET', `/tokens/${id}`, { key })
  const eventually = async (key: string, done: (res: Awaited<ReturnType<typeof read>>) => boolean) => {
    const deadline = Date.now() + 5000
    let res = await read(b, key)
    while (!done(res) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20))
      res = await read(b, key)
    }
    return res
  }
  const pub = () => app({ type: 'public', rules: [{ priority: 1, container: '/', transform: 'redact', permissions: ['token:create'] }] })
  const priv = () => app({ type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:read'] }] })

  const authorizer = await priv()
  const narrowed = await session((await pub()).key, authorizer.key)
  await a.request('PUT', `/applications/${authorizer.id}`, { body: { name: 'x', rules: [{ priority: 1, container: '/', transform: 'mask', permissions: ['token:read'] }] } })
  const masked = await eventually(narrowed, (res) => res.body?.data?.number !== card().number)
  t.equal(masked.body.data.number, 'XXXXXXXXXXXX4242', 'narrowed on the other process')
  await a.request('DELETE', `/applications/${authorizer.id}`)
  t.equal((await eventually(narrowed, (res) => res.status !== 200)).status, 401, 'ended on the other process when its authorizer is deleted')

  const narrowedCreator = await pub()
  const ended = await session(narrowedCreator.key, (await priv()).key)
  await a.request('PUT', `/applications/${narrowedCreator.id}`, { body: { name: 'x', rules: [{ priority: 1, container: '/general/', transform: 'redact', permissions: ['token:create'] }] } })
  t.equal((await eventually(ended, (res) => res.status !== 200)).status, 401, 'ended on the other process when its creator is narrowed')

  const creator = await pub()
  const regenerated = await session(creator.key, (await priv()).key)
  await a.request('POST', `/applications/${creator.id}/regenerate`)
  t.equal((await eventually(regenerated, (res) => res.status !== 200)).status, 401, 'ended on the other process when its creator key is regenerated')
})
