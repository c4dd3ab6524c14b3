import { randomUUID } from 'node:crypto'
import { readFileSync } from 'node:fs'
import t from 'tap'
import { operations } from '../../src/auth/operations.js'
import { permissions, type Permission } from '../../src/auth/permissions.js'
import { buildRouters } from '../../src/app.js'
import { startTestApp, type TestApp } from '../helpers/app.js'

// The operations table (GET /permissions, the README) is what the routes enforce: every route is
// listed, and a key holding everything else but an operation's permission is refused with a
// 403 that names it.

const management = permissions.filter((p) => p.application_types.includes('management')).map((p) => p.type)
const privateTokens = permissions.filter((p) => p.application_types.includes('private')).map((p) => p.type)

async function keyWithout(app: TestApp, missing: Permission): Promise<string> {
  const isToken = missing.startsWith('token:')
  const held = (isToken ? privateTokens : management).filter((p) => p !== missing)
  const body = isToken
    ? { name: 'all but one', type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: held }] }
    : { name: 'all but one', type: 'management', permissions: held }
  const res = await app.request('POST', '/applications', { body })
  if (res.status !== 201) throw new Error(`${res.status} ${res.text}`)
  return res.body.key
}

t.test('every route is in the operations table', async (t) => {
  const app = await startTestApp(t)
  // The first router is the open one (no SVC-API-KEY): health, docs, the operator's POST /tenants.
  const [open, api] = buildRouters(app.services)
  const routesOf = (router: typeof api) =>
    router!.stack.flatMap((layer) => layer.methods.filter((m) => m !== 'HEAD').map((m) => `${m} ${String(layer.path).replace(/:(\w+)/g, '{$1}')}`))
  const listed = new Set(operations.map((o) => o.operation))
  const routes = routesOf(api)
  for (const route of routes) t.ok(listed.has(route), `${route} is listed`)
  t.ok(routes.length > 25, 'found the routers')
  t.same(routesOf(open).filter((r) => listed.has(r)), [], 'open routes need no key, so none is in the table')
})

t.test('the README lists the same operations and permissions', async (t) => {
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8')
  for (const op of operations) {
    t.ok(readme.includes(`| \`${op.operation}\` | ${op.permission ? `\`${op.permission}\`` : '—'} | ${op.who} |`), op.operation)
  }
})

t.test('each operation refuses a key that lacks its permission, naming it', async (t) => {
  const app = await startTestApp(t)
  for (const op of operations) {
    if (op.permission === null) continue
    const key = await keyWithout(app, op.permission)
    const [method, template] = op.operation.split(' ') as [string, string]
    const path = template.replace('{id}', randomUUID()).replace('{path}', 'x')
    const headers: Record<string, string> = path.startsWith('/proxy') ? { 'SVC-PROXY-URL': 'http://127.0.0.1:9' } : {}
    const res = await app.request(method === 'ANY' ? 'POST' : method, path, { key, headers, body: method === 'GET' ? undefined : {} })
    t.equal(res.status, 403, `${op.operation} without ${op.permission}`)
    t.match(JSON.stringify(res.body), op.permission, `${op.operation}: names ${op.permission}`)
  }
})
