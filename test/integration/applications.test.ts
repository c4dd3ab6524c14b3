import t from 'tap'
import { startTestApp, type TestApp } from '../helpers/app.js'
import { testClock } from '../helpers/clock.js'

const privateApp = { name: 'backend', type: 'private', permissions: ['token:read', 'token:use'] }

async function create(app: TestApp, body: object, key?: string) {
  const res = await app.request('POST', '/applications', { body, key })
  return res
}

t.test('applications API', async (t) => {
  const app = await startTestApp(t)

  t.test('create returns 201 with the key once', async (t) => {
    const res = await create(app, { ...privateApp, rules: [{ priority: 1, container: '/pci/', transform: 'mask', permissions: ['token:read'] }] })
    t.equal(res.status, 201)
    t.match(res.body, { name: 'backend', type: 'private', permissions: ['token:read', 'token:use'] })
    t.match(res.body.key, /^tsr_priv_[A-Za-z0-9]{43}$/)
    t.match(res.body.id, /^[0-9a-f-]{36}$/)
    t.ok(res.body.created_at && res.body.modified_at)
    const me = await app.request('GET', '/applications/key')
    t.equal(res.body.created_by, me.body.id, 'created_by is the calling Application')
    const got = await app.request('GET', `/applications/${res.body.id}`)
    t.equal(got.status, 200)
    t.notOk('key' in got.body, 'get never returns the key')
    t.same(got.body.rules, res.body.rules)
  })

  t.test('the new key authenticates as that Application', async (t) => {
    const res = await create(app, { name: 'reader', type: 'management', permissions: ['application:read'] })
    const own = await app.request('GET', '/applications/key', { key: res.body.key })
    t.equal(own.status, 200)
    t.equal(own.body.id, res.body.id)
    const denied = await create(app, privateApp, res.body.key)
    t.equal(denied.status, 403)
    t.equal(denied.headers.get('content-type'), 'application/problem+json')
    t.match(denied.body, { status: 403, title: String })
  })

  t.test('validation errors name the field', async (t) => {
    const cases: [object, string][] = [
      [{ ...privateApp, name: 'x'.repeat(201) }, 'name'],
      [{ ...privateApp, name: undefined }, 'name'],
      [{ ...privateApp, type: 'admin' }, 'type'],
      [{ name: 'n', type: 'private' }, 'permissions'],
      [{ name: 'n', type: 'private', permissions: [], rules: [] }, 'permissions'],
      [{ ...privateApp, permissions: ['application:create'] }, 'permissions[0]'],
      [{ ...privateApp, permissions: ['nope:nope'] }, 'permissions[0]'],
      [{ name: 'n', type: 'public', permissions: ['token:read'] }, 'permissions[0]'],
      [{ ...privateApp, expires_at: 'tomorrow' }, 'expires_at'],
      [{ ...privateApp, expires_at: '2001-01-01T00:00:00Z' }, 'expires_at'],
      [{ ...privateApp, colour: 'blue' }, 'colour'],
      [{ name: 'n', type: 'private', rules: [{ priority: 0, container: '/a/', transform: 'mask', permissions: ['token:read'] }] }, 'rules[0].priority'],
      [{ name: 'n', type: 'private', rules: [{ priority: 1, container: '/a/', transform: 'show', permissions: ['token:read'] }] }, 'rules[0].transform'],
      [{ name: 'n', type: 'private', rules: [{ priority: 1, container: '/a/', transform: 'mask', permissions: [] }] }, 'rules[0].permissions'],
      [{ name: 'n', type: 'private', rules: [{ priority: 1, container: 'pci', transform: 'mask', permissions: ['token:read'] }] }, 'rules[0].container'],
      [{ name: 'n', type: 'private', rules: [{ priority: 1, transform: 'mask', permissions: ['token:read'] }] }, 'rules[0].container'],
      [
        { name: 'n', type: 'private', rules: [{ priority: 1, conditions: [{ attribute: 'id', operator: 'equals', value: 'x' }], transform: 'mask', permissions: ['token:read'] }] },
        'rules[0].conditions',
      ],
      [
        { name: 'n', type: 'private', rules: [{ priority: 1, container: '/a/', conditions: [{ attribute: 'id', operator: 'equals', value: 'x' }], transform: 'mask', permissions: ['token:read'] }] },
        'rules[0].container',
      ],
      [
        {
          name: 'n',
          type: 'private',
          rules: [
            { priority: 1, container: '/a/', transform: 'mask', permissions: ['token:read'] },
            { priority: 1, container: '/b/', transform: 'mask', permissions: ['token:read'] },
          ],
        },
        'rules[1].priority',
      ],
    ]
    for (const [body, field] of cases) {
      const res = await create(app, body)
      t.equal(res.status, 400, `${field}: 400`)
      t.equal(res.headers.get('content-type'), 'application/problem+json')
      t.ok(res.body?.errors?.[field], `${field} in errors: ${JSON.stringify(res.body?.errors)}`)
    }
  })

  t.test('list paginates and filters', async (t) => {
    const fresh = await startTestApp(t)
    const ids: string[] = []
    for (let i = 0; i < 5; i++) ids.push((await create(fresh, { ...privateApp, name: `app ${i}` })).body.id)
    const page = await fresh.request('GET', '/applications?page=2&size=2')
    t.equal(page.status, 200)
    t.same(page.body.pagination, { total_items: 6, page_number: 2, page_size: 2, total_pages: 3 })
    t.equal(page.body.data.length, 2)
    t.notOk(page.body.data.some((a: { key?: string }) => a.key), 'list never returns keys')
    const byId = await fresh.request('GET', `/applications?id=${ids[0]}&id=${ids[1]}`)
    t.same(byId.body.data.map((a: { id: string }) => a.id).sort(), [ids[0], ids[1]].sort())
    const byType = await fresh.request('GET', '/applications?type=management')
    t.equal(byType.body.pagination.total_items, 1)
    const defaults = await fresh.request('GET', '/applications')
    t.match(defaults.body.pagination, { page_number: 1, page_size: 20 })
    for (const q of ['page=0', 'size=0', 'size=101', 'page=abc', 'id=not-a-uuid', 'type=admin', 'colour=red']) {
      const res = await fresh.request('GET', `/applications?${q}`)
      t.equal(res.status, 400, `${q}: 400`)
      t.ok(res.body.errors, `${q} has errors`)
    }
  })

  t.test('update replaces name and grants, never the type', async (t) => {
    const created = await create(app, privateApp)
    const id = created.body.id
    const updated = await app.request('PUT', `/applications/${id}`, { body: { name: 'renamed', permissions: ['token:read'] } })
    t.equal(updated.status, 200)
    t.match(updated.body, { name: 'renamed', permissions: ['token:read'], type: 'private' })
    t.notOk('key' in updated.body)
    t.not(updated.body.modified_at, created.body.modified_at)
    const withType = await app.request('PUT', `/applications/${id}`, { body: { name: 'x', type: 'public', permissions: ['token:read'] } })
    t.equal(withType.status, 400)
    t.ok(withType.body.errors.type)
    const empty = await app.request('PUT', `/applications/${id}`, { body: { name: 'x', permissions: [] } })
    t.equal(empty.status, 400)
    t.ok(empty.body.errors.permissions)
    const missing = await app.request('PUT', '/applications/00000000-0000-4000-8000-000000000000', { body: { name: 'x', permissions: ['token:read'] } })
    t.equal(missing.status, 404)
    // The updated grants apply to the Application's next request.
    // Token permissions on a management key are the ceiling of what it may grant (issue 12).
    const mgmt = await create(app, { name: 'm', type: 'management', permissions: ['application:read', 'application:create', 'token:read', 'token:use'] })
    t.equal((await create(app, privateApp, mgmt.body.key)).status, 201)
    await app.request('PUT', `/applications/${mgmt.body.id}`, { body: { name: 'm', permissions: ['application:read'] } })
    t.equal((await create(app, privateApp, mgmt.body.key)).status, 403, 'revoked permission is gone at once')
  })

  t.test('regenerate: the old key fails at once, the new one works', async (t) => {
    const created = await create(app, { name: 'r', type: 'management', permissions: ['application:read'] })
    t.equal((await app.request('GET', '/applications/key', { key: created.body.key })).status, 200)
    const regen = await app.request('POST', `/applications/${created.body.id}/regenerate`)
    t.equal(regen.status, 200)
    t.match(regen.body.key, /^tsr_mgmt_/)
    t.not(regen.body.key, created.body.key)
    t.equal((await app.request('GET', '/applications/key', { key: created.body.key })).status, 401)
    t.equal((await app.request('GET', '/applications/key', { key: regen.body.key })).status, 200)
    t.equal((await app.request('POST', '/applications/00000000-0000-4000-8000-000000000000/regenerate')).status, 404)
  })

  t.test('delete: 204, the key fails at once, then 404', async (t) => {
    const created = await create(app, { name: 'd', type: 'management', permissions: ['application:read'] })
    t.equal((await app.request('GET', '/applications/key', { key: created.body.key })).status, 200)
    const del = await app.request('DELETE', `/applications/${created.body.id}`)
    t.equal(del.status, 204)
    t.equal(del.text, '')
    t.equal((await app.request('GET', '/applications/key', { key: created.body.key })).status, 401)
    t.equal((await app.request('GET', `/applications/${created.body.id}`)).status, 404)
    t.equal((await app.request('DELETE', `/applications/${created.body.id}`)).status, 404)
    t.equal((await app.request('GET', '/applications/not-a-uuid')).status, 404)
  })

  t.test('authentication failures are 401 problems', async (t) => {
    for (const key of [null, '', 'key_doesnotexist0000000000000000000000000000', 'bad key!']) {
      const res = await app.request('GET', '/applications', { key })
      t.equal(res.status, 401, `key ${JSON.stringify(key)}`)
      t.equal(res.headers.get('content-type'), 'application/problem+json')
      t.notMatch(res.text, /doesnotexist/, 'the key is not echoed')
    }
  })

  t.test('permissions endpoint', async (t) => {
    const res = await app.request('GET', '/permissions?application_type=private')
    t.equal(res.status, 200)
    t.ok(res.body.some((p: { type: string }) => p.type === 'token:use'))
    t.notOk(res.body.some((p: { type: string }) => p.type === 'application:create'))
    t.equal((await app.request('GET', '/permissions?application_type=root')).status, 400)
  })
})

t.test('expiry: refused at once, removed by the sweep', async (t) => {
  const clock = testClock()
  const app = await startTestApp(t, {}, { clock })
  const soon = new Date(clock() + 60_000).toISOString()
  const created = await create(app, { name: 'temp', type: 'management', permissions: ['application:read'], expires_at: soon })
  t.equal(created.status, 201)
  t.equal(created.body.expires_at, new Date(soon).toISOString())
  t.equal((await app.request('GET', '/applications/key', { key: created.body.key })).status, 200)
  clock.advance(59_000)
  t.equal(await app.services.applications.sweepExpired(), 0, 'not yet')
  clock.advance(1_000)
  t.equal((await app.request('GET', '/applications/key', { key: created.body.key })).status, 401)
  t.equal((await app.request('GET', `/applications/${created.body.id}`)).status, 200, 'still stored until the sweep')
  t.equal(await app.services.applications.sweepExpired(), 1)
  t.equal((await app.request('GET', `/applications/${created.body.id}`)).status, 404)
})

t.test('tenant isolation: another tenant sees 404 everywhere', async (t) => {
  const app = await startTestApp(t, { SVC_OPERATOR_KEY: 'operator-key-0123456789abcdef0123456789' })
  const other = await app.request('POST', '/tenants', { key: 'operator-key-0123456789abcdef0123456789', body: { name: 'acme' } })
  t.equal(other.status, 201)
  t.match(other.body, { tenant: { name: 'acme' }, application: { type: 'management', key: /^tsr_mgmt_/ } })
  const otherKey = other.body.application.key
  const mine = await create(app, privateApp)
  const id = mine.body.id
  t.equal((await app.request('GET', `/applications/${id}`, { key: otherKey })).status, 404)
  t.equal((await app.request('PUT', `/applications/${id}`, { key: otherKey, body: { name: 'x', permissions: ['token:read'] } })).status, 404)
  t.equal((await app.request('POST', `/applications/${id}/regenerate`, { key: otherKey })).status, 404)
  t.equal((await app.request('DELETE', `/applications/${id}`, { key: otherKey })).status, 404)
  const list = await app.request('GET', `/applications?id=${id}`, { key: otherKey })
  t.equal(list.body.pagination.total_items, 0)
  t.equal((await app.request('GET', `/applications/${id}`)).status, 200, 'untouched for its owner')
  t.equal((await app.request('POST', '/tenants', { key: 'wrong', body: { name: 'x' } })).status, 401)
  t.equal((await app.request('POST', '/tenants', { key: 'operator-key-0123456789abcdef0123456789', body: { name: 'acme' } })).status, 409)
})

t.test('POST /tenants does not exist without an operator key', async (t) => {
  const app = await startTestApp(t)
  t.equal((await app.request('POST', '/tenants', { body: { name: 'x' } })).status, 404)
})

t.test('no raw key is stored', async (t) => {
  const app = await startTestApp(t)
  const created = await create(app, privateApp)
  const rows = await app.services.store.db.knex('applications').select('*')
  const dump = JSON.stringify(rows)
  t.notMatch(dump, created.body.key)
  t.notMatch(dump, app.adminKey)
})

t.test('a tenant name of the longest length: its management Application\'s name is cut to fit', async (t) => {
  const operatorKey = 'operator-key-0123456789abcdef0123456789'
  const app = await startTestApp(t, { SVC_OPERATOR_KEY: operatorKey })
  for (const name of ['n'.repeat(200), 'é'.repeat(190), '😀'.repeat(100)]) {
    const res = await app.request('POST', '/tenants', { key: operatorKey, body: { name } })
    t.equal(res.status, 201, `${[...name].length} characters`)
    t.equal(res.body.tenant.name, name)
    const own = await app.request('GET', `/applications/${res.body.application.id as string}`, { key: res.body.application.key as string })
    t.ok(own.body.name.endsWith(' management') && [...(own.body.name as string)].length <= 200, 'the management Application fits its 200 characters')
  }
})
