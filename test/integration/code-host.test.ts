import t from 'tap'
import { AppError } from '../../src/errors/index.js'
import { createCodeHost, type CodeHost } from '../../src/reactors/code-host.js'
import { startTestApp } from '../helpers/app.js'
import { application } from '../helpers/tokens.js'

/**
 * The one host of code that runs as an Application (reactors/code-host.ts), over the app's own
 * store and Reactor runtime: what Reactors and pre-configured proxies both rely on when code is
 * saved, versioned, bound to an Application and run.
 */

async function failure(promise: Promise<unknown>): Promise<AppError> {
  const err = await promise.then(() => undefined, (e: unknown) => e)
  if (!(err instanceof AppError)) throw new Error(`expected an AppError, got ${String(err)}`)
  return err
}

t.test('code host', async (t) => {
  const app = await startTestApp(t)
  const { store, supervisor, authenticator } = app.services
  const host: CodeHost = createCodeHost({ store, runtime: supervisor, codeMaxChars: 60 })
  const admin = await authenticator.authenticate(app.adminKey)
  const reader = await application(app, { type: 'private', permissions: ['token:read'] })
  const ok = 'module.exports = async (req) => ({ raw: req.args })'

  t.test('check: every field error at once, the owner\'s own too, before anything is compiled', async (t) => {
    const err = await failure(
      host.check(admin, { pieces: [{ code: `// ${'x'.repeat(60)}`, field: 'request_transform.code' }, { code: 'not even (', field: 'response_transform.code' }], application: { id: 'not-a-uuid' } }, { destination_url: ['owner'] }),
    )
    t.equal(err.code, 'validation')
    t.same(err.errors, { destination_url: ['owner'], 'request_transform.code': ['must be at most 60 characters'], 'application.id': ['no Application with this id'] })
    const unknown = await failure(host.check(admin, { pieces: [{ code: ok, field: 'code' }], application: { id: '00000000-0000-4000-8000-000000000000' } }))
    t.same(unknown.errors, { 'application.id': ['no Application with this id'] })
  })

  t.test('check: a syntax error is reported under the piece\'s field, its label before the message', async (t) => {
    const labelled = await failure(host.check(admin, { pieces: [{ code: ok, field: 'request_transform.code', label: 'request_transform' }, { code: 'module.exports = (', field: 'response_transform.code', label: 'response_transform' }] }))
    t.equal(labelled.code, 'reactor_compile')
    t.match(labelled.detail, /^response_transform: SyntaxError/)
    t.match(labelled.errors, { 'response_transform.code': [/^SyntaxError/] })
    const plain = await failure(host.check(admin, { pieces: [{ code: 'module.exports = (', field: 'code' }] }))
    t.match(plain.detail, /^SyntaxError/)
    t.match(plain.errors, { code: [/^SyntaxError/] })
    await host.check(admin, { pieces: [{ code: ok, field: 'code' }], application: { id: reader.id } })
  })

  t.test('binding: an Application wider than the caller is refused, on save and on change', async (t) => {
    const narrow = await authenticator.authenticate((await application(app, { type: 'management', permissions: ['reactor:create', 'reactor:update'] })).key)
    const bound = await failure(host.check(narrow, { pieces: [{ code: ok, field: 'code' }], application: { id: reader.id } }))
    t.equal(bound.code, 'forbidden')
    t.match(bound.errors, { 'application.id': [String] })
    const changed = await failure(host.authorizeBound(narrow, reader.id))
    t.equal(changed.code, 'forbidden')
    t.match(changed.errors, { id: [String] })
    await host.authorizeBound(narrow, null)
    await host.authorizeBound(admin, reader.id)
  })

  t.test('version: kept while the code is the same, new when it changes', async (t) => {
    const first = host.version(['a', null])
    t.match(first, /^[0-9a-f-]{36}$/)
    t.equal(host.version(['a', null], { code: ['a', null], version: first }), first)
    t.not(host.version(['a', 'b'], { code: ['a', null], version: first }), first)
    t.not(host.version(['b'], { code: ['a'], version: first }), first)
  })

  t.test('actor and invoke: the code runs as its Application', async (t) => {
    const actor = await host.actor(admin.tenantId, reader.id)
    t.match(actor, { kind: 'application', id: reader.id, tenantId: admin.tenantId, permissions: ['token:read'] })
    t.equal(await host.actor(admin.tenantId, null), undefined, 'bound to none')
    t.equal(await host.actor('00000000-0000-4000-8000-000000000000', reader.id), undefined, 'not in another tenant')
    const code = { tenantId: admin.tenantId, reactorId: 'code-host-test', version: 'v1', code: 'module.exports = async (req) => ({ args: req.args, c: req.configuration })', configuration: { A: 'b' } }
    t.same(await host.invoke(code, { n: 1 }, { actor }), { kind: 'ok', value: { args: { n: 1 }, c: { A: 'b' } } })
    host.retire('code-host-test')
  })
})

t.test('over HTTP, Reactors and proxies report a too-long code and an unknown Application together', async (t) => {
  const app = await startTestApp(t)
  const unknown = { id: '00000000-0000-4000-8000-000000000000' }
  const reactor = await app.request('POST', '/reactors', { body: { name: 'long', code: `// ${'x'.repeat(50_000)}`, application: unknown } })
  t.equal(reactor.status, 400)
  t.same(Object.keys(reactor.body.errors).sort(), ['application.id', 'code'])
  const proxy = await app.request('POST', '/proxies', {
    body: { name: 'long', destination_url: 'https://example.com', request_transform: { code: `// ${'x'.repeat(50_000)}` }, application: unknown },
  })
  t.equal(proxy.status, 400)
  t.same(Object.keys(proxy.body.errors).sort(), ['application.id', 'request_transform.code'])
})

t.test('an Application deleted while code bound to it is saved: 400 naming application.id, never a 500', async (t) => {
  const app = await startTestApp(t)
  const code = 'module.exports = async (req) => ({ raw: req.args })'
  const grant = { type: 'private', rules: [{ priority: 1, container: '/general/', transform: 'reveal', permissions: ['token:use'] }] }
  const statuses: number[] = []
  for (let round = 0; round < 4; round++) {
    const actor = await application(app, grant)
    const reactor = await app.request('POST', '/reactors', { body: { name: 'r', code } })
    // Compiling the code leaves time for the delete to land between the check and the write.
    const saves = [
      app.request('POST', '/reactors', { body: { name: 'r', code, application: { id: actor.id } } }),
      app.request('POST', '/proxies', { body: { name: 'p', destination_url: 'https://example.com', request_transform: { code }, application: { id: actor.id } } }),
      app.request('PUT', `/reactors/${reactor.body.id}`, { body: { name: 'r', code: `${code} // v2`, application: { id: actor.id } } }),
    ]
    t.equal((await app.request('DELETE', `/applications/${actor.id}`)).status, 204)
    for (const res of await Promise.all(saves)) {
      statuses.push(res.status)
      if (res.status === 400) t.same(Object.keys(res.body.errors), ['application.id'], `round ${round}: names application.id`)
      else t.ok(res.status === 200 || res.status === 201, `round ${round}: saved before the delete (${res.status})`)
    }
  }
  t.comment(`statuses: ${statuses.join(' ')}`)
})
