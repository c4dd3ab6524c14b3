import t from 'tap'
import { startTestApp, type TestApp } from '../helpers/app.js'

const PROBLEM = 'application/problem+json'

async function tokenKey(app: TestApp): Promise<string> {
  const res = await app.request('POST', '/applications', {
    body: { name: 'writer', type: 'private', permissions: ['token:create', 'token:read', 'token:update', 'token:search'] },
  })
  return res.body.key as string
}

async function counts(app: TestApp, key: string): Promise<[number, number]> {
  const apps = await app.request('GET', '/applications')
  const tokens = await app.request('GET', '/tokens', { key })
  return [apps.body.pagination.total_items as number, tokens.body.pagination.total_items as number]
}

t.test('NUL characters, lone surrogates and prototype keys are 400s naming the field, and store nothing', async (t) => {
  const app = await startTestApp(t)
  const key = await tokenKey(app)
  const before = await counts(app, key)
  const json = { 'content-type': 'application/json' }
  const cases: [string, string, string, string][] = [
    ['NUL in a name', '/applications', JSON.stringify({ name: 'a\u0000b', type: 'private', permissions: ['token:read'] }), 'name'],
    ['NUL in a rule', '/applications', JSON.stringify({ name: 'a', type: 'private', rules: [{ priority: 1, container: '/a/', transform: 'mask', permissions: ['token:read'], description: '\u0000' }] }), 'rules[0].description'],
    ['lone surrogate in a name', '/applications', '{"name":"a\\ud800","type":"private","permissions":["token:read"]}', 'name'],
    ['lone low surrogate', '/applications', '{"name":"\\udc00a","type":"private","permissions":["token:read"]}', 'name'],
    ['toString field', '/applications', JSON.stringify({ name: 'a', type: 'private', permissions: ['token:read'], toString: 1 }), 'toString'],
    ['constructor field', '/applications', JSON.stringify({ name: 'a', type: 'private', permissions: ['token:read'], constructor: 'x' }), 'constructor'],
    ['hasOwnProperty field', '/applications', JSON.stringify({ name: 'a', type: 'private', permissions: ['token:read'], hasOwnProperty: null }), 'hasOwnProperty'],
    ['NUL in metadata', '/tokens', JSON.stringify({ type: 'token', data: 'x', metadata: { a: 'b\u0000' } }), 'metadata.a'],
    ['NUL in a metadata key', '/tokens', JSON.stringify({ type: 'token', data: 'x', metadata: { 'a\u0000': 'b' } }), 'metadata'],
    ['NUL in data', '/tokens', JSON.stringify({ type: 'token', data: { deep: ['x\u0000'] } }), 'data.deep[0]'],
    ['lone surrogate in a token id', '/tokens', '{"type":"token","data":"x","id":"token\\ud800id"}', 'id'],
    ['toString in a token', '/tokens', JSON.stringify({ type: 'token', data: 'x', toString: 'y' }), 'toString'],
    ['NUL in a search', '/tokens/search', JSON.stringify({ query: 'id:\u0000' }), 'query'],
    ['NUL in tokenize', '/tokenize', JSON.stringify({ a: { b: '\u0000' } }), 'a.b'],
  ]
  for (const [label, path, rawBody, field] of cases) {
    const res = await app.request('POST', path, { key: path === '/applications' ? undefined : key, rawBody, headers: json })
    t.equal(res.status, 400, `${label}: 400`)
    t.equal(res.headers.get('content-type'), PROBLEM, `${label}: problem+json`)
    t.ok(res.body?.errors?.[field], `${label}: names ${field} (${res.text.slice(0, 200)})`)
  }
  t.same(await counts(app, key), before, 'nothing was stored')
})

t.test('NUL in path parameters and query values is a 400 naming it', async (t) => {
  const app = await startTestApp(t)
  const key = await tokenKey(app)
  for (const [path, field] of [
    ['/tokens/%00', 'path'],
    ['/tokens/abc%00def', 'path'],
    ['/tokens?id=%00', 'id'],
    ['/tokens?metadata.colour=red%00', 'metadata.colour'],
    ['/tokens?container=/a/&container=%00', 'container'],
    ['/tokens?x%00=1', 'query'],
    ['/applications?type=%00', 'type'],
  ] as const) {
    const res = await app.request('GET', path, { key: path.startsWith('/tokens') ? key : undefined })
    t.equal(res.status, 400, `${path}: 400`)
    t.ok(res.body?.errors?.[field], `${path}: names ${field}`)
  }
})

t.test('PATCH /tokens/{id} takes application/merge-patch+json only', async (t) => {
  const app = await startTestApp(t)
  const key = await tokenKey(app)
  const created = await app.request('POST', '/tokens', { key, body: { type: 'token', data: 'x', metadata: { k: 'v' } } })
  t.equal(created.status, 201)
  const id = created.body.id as string
  for (const type of ['application/json', 'text/plain', 'application/x-www-form-urlencoded']) {
    const res = await app.request('PATCH', `/tokens/${id}`, { key, rawBody: '{"metadata":{"k":"changed"}}', headers: { 'content-type': type } })
    t.equal(res.status, 415, `${type}: 415`)
    t.equal(res.headers.get('content-type'), PROBLEM)
  }
  t.same((await app.request('GET', `/tokens/${id}`, { key })).body.metadata, { k: 'v' }, 'nothing changed')
  const patched = await app.request('PATCH', `/tokens/${id}`, {
    key,
    rawBody: '{"metadata":{"k":"changed"}}',
    headers: { 'content-type': 'application/merge-patch+json; charset=utf-8' },
  })
  t.equal(patched.status, 200)
  t.same(patched.body.metadata, { k: 'changed' })
})

t.test('a rule with both container and conditions names rules[i].container', async (t) => {
  const app = await startTestApp(t)
  const res = await app.request('POST', '/applications', {
    body: {
      name: 'a',
      type: 'private',
      rules: [
        { priority: 1, container: '/a/', transform: 'mask', permissions: ['token:read'] },
        { priority: 2, container: '/b/', conditions: [{ attribute: 'id', operator: 'equals', value: 'x' }], transform: 'mask', permissions: ['token:read'] },
      ],
    },
  })
  t.equal(res.status, 400)
  t.ok(res.body.errors['rules[1].container'], 'names the field')
  t.notOk(res.body.errors['rules[1]'], 'not only the rule')
})

t.test('search fields and query parameters spelled like Object.prototype members are 400s, never 500s or dropped filters', async (t) => {
  const app = await startTestApp(t)
  const key = await tokenKey(app)
  t.equal((await app.request('POST', '/tokens', { key, body: { type: 'token', data: 'x', metadata: { a: 'b' } } })).status, 201)
  for (const path of ['/tokens/search', '/v2/tokens/search']) {
    for (const query of ['constructor:x', '__proto__:x', 'type:token constructor:x']) {
      const res = await app.request('POST', path, { key, body: { query } })
      t.equal(res.status, 400, `${path} ${query}: 400`)
      t.ok(res.body?.errors?.query, `${path} ${query}: names query`)
    }
  }
  // A metadata filter on `__proto__` is a filter (no token has that key), not an absent one.
  const searched = await app.request('POST', '/tokens/search', { key, body: { query: 'metadata.__proto__:x' } })
  t.equal(searched.body.pagination.total_items, 0, 'search: metadata.__proto__ filters')
  const listed = await app.request('GET', '/tokens?metadata.__proto__=x', { key })
  t.equal(listed.body.pagination.total_items, 0, 'list: metadata.__proto__ filters')
  for (const [path, field] of [
    ['/tokens?__proto__=x', '__proto__'],
    ['/logs?__proto__=x', '__proto__'],
    ['/logs?constructor=x', 'constructor'],
    ['/logs?toString=x&hasOwnProperty=y', 'toString'],
  ] as const) {
    const res = await app.request('GET', path, { key: path.startsWith('/tokens') ? key : undefined })
    t.equal(res.status, 400, `${path}: 400`)
    t.ok(res.body?.errors?.[field], `${path}: names ${field}`)
  }
})

t.test('numbers and dates that no store can hold are 400s naming the field', async (t) => {
  const app = await startTestApp(t)
  const key = await tokenKey(app)
  const before = await counts(app, key)
  const json = { 'content-type': 'application/json' }
  for (const [label, path, rawBody, field] of [
    ['1e400 in data', '/tokens', '{"type":"token","data":{"n":1e400}}', 'data.n'],
    ['-1e400 in tokenize', '/tokenize', '{"a":-1e400}', 'a'],
    ['1e400 page in search', '/tokens/search', '{"query":"type:token","page":1e400}', 'page'],
    ['1e300 page in search', '/tokens/search', '{"query":"type:token","page":1e300}', 'page'],
    ['an integer past 2^53 in data', '/tokens', '{"type":"token","data":{"account":12345678901234567891}}', 'body'],
    ['an integer past 2^53 in tokenize', '/tokenize', '{"a":{"n":-9007199254740993}}', 'body'],
    ['leap second in expires_at', '/tokens', '{"type":"token","data":"x","expires_at":"2099-06-30T23:59:60Z"}', 'expires_at'],
    ['leap second on an Application', '/applications', '{"name":"a","type":"private","permissions":["token:read"],"expires_at":"2099-12-31T23:59:60Z"}', 'expires_at'],
  ] as const) {
    const res = await app.request('POST', path, { key: path === '/applications' ? undefined : key, rawBody, headers: json })
    t.equal(res.status, 400, `${label}: 400`)
    t.ok(res.body?.errors?.[field], `${label}: names ${field} (${res.text.slice(0, 200)})`)
  }
  t.same(await counts(app, key), before, 'nothing was stored')
  for (const data of ['9007199254740991', '-9007199254740991', '9007199254740992', '1e20', '2.5e17', '1.5e300', '6.02e23', '0.1', '0.12345678901234567891', '"12345678901234567891"']) {
    const res = await app.request('POST', '/tokens', { key, rawBody: `{"type":"token","data":{"n":${data}}}`, headers: json })
    t.equal(res.status, 201, `${data}: held as sent (exactly, or a float, or a string), stored`)
  }
  for (const [path, field] of [
    ['/tokens?page=1e400', 'page'],
    ['/tokens?page=Infinity', 'page'],
    ['/applications?page=99999999999999999999', 'page'],
    ['/logs?from=2099-06-30T23:59:60Z', 'from'],
    ['/logs?from=0000-01-01T00:00:00Z', 'from'],
    ['/logs/export?from=2099-06-30T23:59:60Z', 'from'],
  ] as const) {
    const res = await app.request('GET', path, { key: path.startsWith('/tokens') ? key : undefined })
    t.equal(res.status, 400, `${path}: 400`)
    t.ok(res.body?.errors?.[field], `${path}: names ${field} (${res.text.slice(0, 200)})`)
  }
})

t.test('percent-encodings that do not decode to UTF-8 are 400s naming the parameter', async (t) => {
  const app = await startTestApp(t)
  const key = await tokenKey(app)
  for (const [path, field] of [
    ['/tokens/%ED%A0%80', 'path'],
    ['/tokens/%FF', 'path'],
    ['/tokens/abc%zz', 'path'],
    ['/tokens?id=%FF', 'id'],
    ['/tokens?id=%ED%A0%80', 'id'],
    ['/tokens?id=%', 'id'],
    ['/tokens?%FF=1', 'query'],
    ['/tokens?metadata.colour=%C3', 'metadata.colour'],
  ] as const) {
    const res = await app.request('GET', path, { key })
    t.equal(res.status, 400, `${path}: 400`)
    t.ok(res.body?.errors?.[field], `${path}: names ${field} (${res.text.slice(0, 200)})`)
  }
  t.equal((await app.request('GET', '/tokens?id=caf%C3%A9&metadata.a=b+c', { key })).status, 200, 'valid encodings pass')
})
