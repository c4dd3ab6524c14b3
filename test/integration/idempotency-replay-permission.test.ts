import t, { type Test } from 'tap'
import { startTestApp, type TestApp, type TestResponse } from '../helpers/app.js'
import { application, card } from '../helpers/tokens.js'

const idem = (key: string) => ({ 'SVC-IDEMPOTENCY-KEY': key })
const mergePatch = { 'content-type': 'application/merge-patch+json' }
const rulesOn = (container: string, permissions: string[]) => [{ priority: 1, container, transform: 'reveal', permissions }]
const WRITER = rulesOn('/general/', ['token:create', 'token:read', 'token:update'])

/** The admin key narrows (or restores) an Application's grants. */
async function setGrants(t: Test, app: TestApp, id: string, body: Record<string, unknown>): Promise<void> {
  t.equal((await app.request('PUT', `/applications/${id}`, { body: { name: 'test app', ...body } })).status, 200, 'grants changed')
}

/** The refusal a fresh request gets, and nothing of the stored answer. */
function assertRefused(t: Test, replay: TestResponse, fresh: TestResponse, stored: string): void {
  t.equal(fresh.status, 403, 'a fresh request is refused')
  t.equal(replay.status, 403, 'so is the replay')
  t.equal(replay.headers.get('content-type'), 'application/problem+json')
  t.same([replay.body.type, replay.body.detail], [fresh.body.type, fresh.body.detail], 'the same problem')
  t.notOk(replay.headers.get('svc-idempotent-replayed'), 'nothing replayed')
  t.notOk(replay.text.includes(stored), 'nothing of the stored answer')
}

t.test('a replay needs the route permission the caller holds now', async (t) => {
  const app = await startTestApp(t)
  const token = { type: 'card', data: card(), containers: ['/general/'], metadata: { order: '1' } }

  t.test('a create, once the Application lost every token permission there', async (t) => {
    const k = await application(app, { type: 'private', rules: WRITER })
    const first = await app.request('POST', '/tokens', { key: k.key, body: token, headers: idem('idem-1') })
    t.equal(first.status, 201)
    await setGrants(t, app, k.id, { rules: rulesOn('/other/', ['token:use']) })
    const fresh = await app.request('POST', '/tokens', { key: k.key, body: token })
    t.equal((await app.request('GET', `/tokens/${first.body.id}`, { key: k.key })).status, 403, 'nor may it read the token')
    assertRefused(t, await app.request('POST', '/tokens', { key: k.key, body: token, headers: idem('idem-1') }), fresh, first.body.id)
    await setGrants(t, app, k.id, { rules: WRITER })
    const again = await app.request('POST', '/tokens', { key: k.key, body: token, headers: idem('idem-1') })
    t.same([again.status, again.headers.get('svc-idempotent-replayed'), again.body.id], [201, 'true', first.body.id], 'the refusal claimed nothing: the answer is still kept')
  })

  t.test('an update, once the Application may no longer update', async (t) => {
    const k = await application(app, { type: 'private', rules: WRITER })
    const id = (await app.request('POST', '/tokens', { key: k.key, body: token })).body.id as string
    const patch = () => app.request('PATCH', `/tokens/${id}`, { key: k.key, body: { metadata: { order: '2' } }, headers: { ...mergePatch, ...idem('patch-1') } })
    t.equal((await patch()).status, 200)
    await setGrants(t, app, k.id, { rules: rulesOn('/general/', ['token:create', 'token:read']) })
    const fresh = await app.request('PATCH', `/tokens/${id}`, { key: k.key, body: { metadata: { order: '2' } }, headers: mergePatch })
    assertRefused(t, await patch(), fresh, id)
  })

  t.test('a resource route: a management key that lost application:create', async (t) => {
    const manager = await application(app, { type: 'management', permissions: ['application:create', 'application:read'] })
    const body = { name: 'made once', type: 'management', permissions: ['application:read'] }
    const first = await app.request('POST', '/applications', { key: manager.key, body, headers: idem('app-1') })
    t.equal(first.status, 201)
    await setGrants(t, app, manager.id, { permissions: ['application:read'] })
    const fresh = await app.request('POST', '/applications', { key: manager.key, body })
    assertRefused(t, await app.request('POST', '/applications', { key: manager.key, body, headers: idem('app-1') }), fresh, first.body.id)
  })
})
