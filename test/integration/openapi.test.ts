import { compileErrors, dereference, validate } from '@readme/openapi-parser'
import { Ajv2020 } from 'ajv/dist/2020.js'
import addFormats from 'ajv-formats'
import t from 'tap'
import { buildRouters } from '../../src/app.js'
import { errorCodes } from '../../src/errors/index.js'
import { PROXY_METHODS, PROXY_PREFIX } from '../../src/http/routes/proxy.js'
import { startTestApp, type TestApp, type TestResponse } from '../helpers/app.js'
import { appKey, card } from '../helpers/tokens.js'

type Doc = { paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema: object }> }>; parameters: { name?: string; in?: string; $ref?: string }[]; security?: unknown[] }>>; components: { schemas: { Problem: { properties: { type: { enum: string[] } } } } } }

/** Every route the app answers, read off its routers (and the /proxy middleware's own table). */
function registeredRoutes(app: TestApp): string[] {
  const out = new Set<string>()
  for (const router of buildRouters(app.services)) {
    for (const layer of router.stack) {
      for (const method of layer.methods) {
        // @koa/router answers HEAD with every GET route: not an operation of its own.
        if (method !== 'HEAD') out.add(`${method.toLowerCase()} ${String(layer.path).replace(/:([A-Za-z_]+)/g, '{$1}')}`)
      }
    }
  }
  for (const path of [PROXY_PREFIX, `${PROXY_PREFIX}/{path}`]) for (const method of PROXY_METHODS) out.add(`${method.toLowerCase()} ${path}`)
  return [...out].sort()
}

t.test('GET /openapi.json', async (t) => {
  const app = await startTestApp(t)
  const res = await app.request('GET', '/openapi.json', { key: null })
  t.equal(res.status, 200, 'no key needed')
  t.match(res.headers.get('content-type'), /^application\/json/)
  const doc = res.body as Doc

  t.test('is a valid OpenAPI 3.1 document', async (t) => {
    t.equal(res.body.openapi, '3.1.0')
    const result = await validate(structuredClone(res.body))
    t.ok(result.valid, result.valid ? 'valid' : compileErrors(result))
  })

  t.test('describes exactly the routes the app registers', async (t) => {
    const documented = Object.entries(doc.paths).flatMap(([path, item]) => Object.keys(item).map((method) => `${method} ${path}`)).sort()
    const registered = registeredRoutes(app)
    t.ok(registered.length > 40, `${registered.length} routes`)
    t.same(documented, registered)
  })

  t.test('every problem type of the registry, on every operation', async (t) => {
    t.same(doc.components.schemas.Problem.properties.type.enum.sort(), Object.keys(errorCodes).map((c) => `/problems/${c.replaceAll('_', '-')}`).sort())
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(item)) {
        t.ok(operation.responses['429'] && operation.responses['500'], `${method} ${path}: 429 and 500`)
        const idempotent = operation.parameters.some((p) => p.$ref === '#/components/parameters/IdempotencyKey')
        if (idempotent) t.ok(operation.responses['409'] && operation.responses['422'], `${method} ${path}: idempotency conflicts`)
      }
    }
    t.same(doc.paths['/openapi.json']!.get!.security, [], 'open routes need no key')
    t.notOk(doc.paths['/proxy']!.post!.parameters.some((p) => p.$ref?.endsWith('IdempotencyKey')), 'not on the proxy')
    t.notOk(doc.paths['/tokens/search']!.post!.parameters.some((p) => p.$ref?.endsWith('IdempotencyKey')), 'not on reads')
  })

  t.test('real answers match the documented schemas', async (t) => {
    const deref = (await dereference(structuredClone(res.body))) as unknown as Doc
    const ajv = new Ajv2020({ strict: false, allErrors: true })
    addFormats.default(ajv)
    const check = (method: string, path: string, answer: TestResponse) => {
      const responses = deref.paths[path]![method]!.responses
      const doc = responses[String(answer.status)]
      t.ok(doc, `${method} ${path}: ${answer.status} is documented`)
      const content = doc?.content?.[answer.headers.get('content-type')!.split(';')[0]!]
      if (!content) return void t.fail(`${method} ${path}: ${answer.headers.get('content-type')} not documented`)
      const validate = ajv.compile(content.schema)
      t.ok(validate(answer.body), `${method} ${path} ${answer.status}: ${ajv.errorsText(validate.errors)}`)
    }
    const writer = await appKey(app, { type: 'private', permissions: ['token:create', 'token:read', 'token:search'] })
    const created = await app.request('POST', '/applications', { body: { name: 'doc', type: 'private', permissions: ['token:read'] } })
    check('post', '/applications', created)
    check('get', '/applications', await app.request('GET', '/applications'))
    check('get', '/applications/{id}', await app.request('GET', `/applications/${created.body.id}`))
    check('post', '/tokens', await app.request('POST', '/tokens', { key: writer, body: { type: 'card', data: card(), metadata: { a: 'b' } } }))
    check('get', '/tokens', await app.request('GET', '/tokens', { key: writer }))
    check('get', '/v2/tokens', await app.request('GET', '/v2/tokens?size=1', { key: writer }))
    check('post', '/v2/tokens/search', await app.request('POST', '/v2/tokens/search', { key: writer, body: { query: 'type:card' } }))
    check('get', '/tenants/self', await app.request('GET', '/tenants/self'))
    check('get', '/permissions', await app.request('GET', '/permissions'))
    check('post', '/sessions', await app.request('POST', '/sessions'))
    check('get', '/readyz', await app.request('GET', '/readyz', { key: null }))
    check('post', '/applications', await app.request('POST', '/applications', { body: { name: 'x', type: 'private' } }))
    check('get', '/tokens/{id}', await app.request('GET', '/tokens/nope', { key: writer }))
    check('get', '/v2/tokens', await app.request('GET', '/v2/tokens', { key: null }))
    check('post', '/proxy', await app.request('POST', '/proxy', { key: null }))
    // Failures raised where no path parameter, query or body is read.
    const publicKey = await appKey(app, { type: 'public', rules: [{ priority: 1, container: '/general/', transform: 'redact', permissions: ['token:create'] }] })
    const reader = await appKey(app, { type: 'private', permissions: ['token:read'] })
    const user = await appKey(app, { type: 'private', permissions: ['token:use'] })
    const late: [string, string, TestResponse, number][] = [
      ['post', '/sessions', await app.request('POST', '/sessions', { key: publicKey, headers: { 'SVC-IDEMPOTENCY-KEY': 'k'.repeat(5000) } }), 400],
      ['post', '/sessions/authorize', await app.request('POST', '/sessions/authorize', { key: reader, body: { nonce: 'nonce_nope', permissions: ['token:read'] } }), 404],
      ['get', '/proxy', await app.request('GET', '/proxy', { key: user, headers: { 'SVC-PROXY-URL': 'ftp://example.com' } }), 400],
    ]
    for (const [method, path, answer, status] of late) {
      t.equal(answer.status, status, `${method} ${path}: ${status}`)
      check(method, path, answer)
    }
  })
})

t.test('with SVC_METRICS=operator, GET /metrics is served and described too', async (t) => {
  const operatorKey = 'operator-key-for-openapi-0123456789abcdef'
  const app = await startTestApp(t, { SVC_METRICS: 'operator', SVC_OPERATOR_KEY: operatorKey })
  const res = await app.request('GET', '/openapi.json', { key: null })
  const doc = res.body as Doc
  const documented = Object.entries(doc.paths).flatMap(([path, item]) => Object.keys(item).map((method) => `${method} ${path}`)).sort()
  t.ok(registeredRoutes(app).includes('get /metrics'), 'the route is registered')
  t.same(documented, registeredRoutes(app))
  const result = await validate(structuredClone(res.body))
  t.ok(result.valid, result.valid ? 'valid' : compileErrors(result))
  const metrics = await app.request('GET', '/metrics', { key: operatorKey })
  t.equal(metrics.status, 200)
  t.ok(doc.paths['/metrics']!.get!.responses['200']!.content!['text/plain'], 'documented as text/plain')
  t.match(metrics.headers.get('content-type'), /^text\/plain/)
})
