import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import os from 'node:os'
import path from 'node:path'
import pg from 'pg'
import t from 'tap'
import { buildApp } from '../../src/app.js'
import { generateApiKey } from '../../src/auth/api-keys.js'
import { Drain } from '../../src/http/drain.js'
import { startTestApp } from '../helpers/app.js'
import { spawnService, type ServiceProcess } from '../helpers/service-process.js'
import { until } from '../helpers/wait.js'

const json = (key: string, body?: unknown): RequestInit => ({
  method: body === undefined ? 'GET' : 'POST',
  headers: { 'SVC-API-KEY': key, 'content-type': 'application/json' },
  body: body === undefined ? undefined : JSON.stringify(body),
})

/** The environment of one service "installation": its own storage and secrets, reused across restarts. */
async function installation(t: Tap, embedded = !process.env.DATABASE_URL): Promise<Record<string, string>> {
  const env: Record<string, string> = {
    SVC_BOOTSTRAP_API_KEY: generateApiKey(),
    SVC_MASTER_KEY: `k1:${randomBytes(32).toString('base64')}`,
    SVC_KEY_HASH_SECRET: randomBytes(32).toString('hex'),
    SVC_RATE_LIMIT_ENABLED: 'false',
  }
  const url = process.env.DATABASE_URL
  if (embedded || !url) {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'tessera-kill-'))
    t.teardown(() => rmSync(dir, { recursive: true, force: true }))
    return { ...env, SVC_DATA_DIR: dir }
  }
  const schema = `t_${randomBytes(6).toString('hex')}`
  const admin = async (sql: string) => {
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    await client.query(sql).finally(() => client.end())
  }
  await admin(`create schema "${schema}"`)
  t.teardown(() => admin(`drop schema if exists "${schema}" cascade`))
  const sep = url.includes('?') ? '&' : '?'
  return { ...env, DATABASE_URL: `${url}${sep}options=${encodeURIComponent(`-c search_path=${schema}`)}` }
}
type Tap = { teardown(fn: () => unknown): void }

async function privateKey(svc: ServiceProcess, adminKey: string): Promise<string> {
  const rules = [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read', 'token:use'] }]
  const res = await fetch(`${svc.base}/applications`, json(adminKey, { name: 'writer', type: 'private', rules }))
  if (res.status !== 201) throw new Error(`creating an Application: ${res.status}`)
  return ((await res.json()) as { key: string }).key
}

t.test(`no acknowledged write is lost across kill -9 (${process.env.DATABASE_URL ? 'Postgres' : 'PGlite'})`, { timeout: 120_000 }, async (t) => {
  const env = await installation(t)
  const first = await spawnService(t, env)
  const key = await privateKey(first, env.SVC_BOOTSTRAP_API_KEY!)
  const acknowledged = new Map<string, string>()
  let stop = false
  const writer = async (n: number) => {
    for (let i = 0; !stop; i++) {
      const data = `w${n}-${i}`
      try {
        const res = await fetch(`${first.base}/tokens`, json(key, { type: 'token', data }))
        if (res.status === 201) acknowledged.set(((await res.json()) as { id: string }).id, data)
      } catch {
        return // the process is gone
      }
    }
  }
  const writers = [0, 1, 2, 3].map(writer)
  await until(() => acknowledged.size >= 40, 'forty acknowledged writes')
  first.child.kill('SIGKILL')
  await first.exited
  stop = true
  await Promise.all(writers)

  const second = await spawnService(t, env)
  let lost = 0
  for (const [id, data] of acknowledged) {
    const res = await fetch(`${second.base}/tokens/${id}`, json(key))
    if (res.status !== 200 || ((await res.json()) as { data: string }).data !== data) lost++
  }
  t.equal(lost, 0, `all ${acknowledged.size} acknowledged tokens are there after the restart`)
  second.child.kill('SIGTERM')
  t.equal((await second.exited).code, 0)
})

t.test('SIGTERM under load: readiness down, Connection: close, calls aborted and answered at the deadline, exit 0 by grace + 1 s', { timeout: 120_000 }, async (t) => {
  // `/held` never answers: only the shutdown deadline ends the call. `/slow` answers when told.
  const held: http.ServerResponse[] = []
  const slow: http.ServerResponse[] = []
  const dest = http.createServer((req, res) => void (req.url === '/slow' ? slow : held).push(res))
  await new Promise<void>((r) => dest.listen(0, '127.0.0.1', r))
  t.teardown(() => {
    ;[...held, ...slow].forEach((res) => res.destroy())
    dest.close()
  })
  const graceMs = 1500
  // Draining is the same on both backends; PGlite keeps the child off the shared database.
  const env: Record<string, string> = { ...(await installation(t, true)), SVC_SHUTDOWN_GRACE_MS: String(graceMs), SVC_LOG_LEVEL: 'info' }
  const svc = await spawnService(t, env)
  const admin = env.SVC_BOOTSTRAP_API_KEY!
  const key = await privateKey(svc, admin)
  const reactor = await fetch(`${svc.base}/reactors`, json(admin, { name: 'spin', code: 'module.exports = async function () { for (;;) {} }' }))
  t.equal(reactor.status, 201)
  const reactorId = ((await reactor.json()) as { id: string }).id

  const destination = `http://127.0.0.1:${(dest.address() as AddressInfo).port}`
  const proxy = (path: string) => fetch(`${svc.base}/proxy${path}`, { method: 'POST', headers: { 'SVC-API-KEY': key, 'SVC-PROXY-URL': destination }, body: 'x' })
  const proxyCall = proxy('/held')
  const finishing = proxy('/slow')
  const reactorCall = fetch(`${svc.base}/reactors/${reactorId}/react`, json(key, { args: {} }))
  // Steady keep-alive traffic: it must end with the drain, not be served through the grace.
  const load = async () => {
    for (;;) {
      try {
        await (await fetch(`${svc.base}/healthz`)).arrayBuffer()
      } catch {
        return // refused: the listener is closed
      }
    }
  }
  const loads = [load(), load()]
  await until(() => held.length === 1 && slow.length === 1, 'both proxy calls reached the destination')

  const sentAt = Date.now()
  svc.child.kill('SIGTERM')
  await until(() => svc.output().includes('draining'), 'draining started')
  slow[0]!.end('finished')
  const finished = await finishing
  t.equal(finished.status, 200, 'an in-flight request that can finish within the grace does')
  t.equal(finished.headers.get('connection'), 'close', 'and its keep-alive connection is told to close')

  const [proxied, reacted, exit] = await Promise.all([proxyCall, reactorCall, svc.exited])
  await Promise.all(loads)
  t.equal(proxied.status, 504, 'the destination call was aborted and answered: sent, its outcome is unknown')
  t.equal(((await proxied.json()) as { proxy_error: { type: string } }).proxy_error.type, '/problems/destination-timeout')
  t.equal(reacted.status, 503, 'the Reactor call was aborted and answered')
  t.equal(exit.code, 0, 'exit 0')
  // The drain's own budget ends before grace + 1 s; 0.5 s more is room for a loaded machine.
  t.ok(exit.at - sentAt <= graceMs + 1500, `exited ${exit.at - sentAt} ms after SIGTERM (grace ${graceMs} ms)`)
  const logged = (path: string) => svc.output().split('\n').find((l) => l.includes('"msg":"request"') && l.includes(`"path":"${path}"`)) ?? ''
  t.match(logged('/proxy/held'), /"status":504.*"shutdown":"aborted at the deadline"/, 'the access log says what happened to the destination call')
  t.match(logged(`/reactors/${reactorId}/react`), /"status":503.*"shutdown":"aborted at the deadline"/, 'and to the Reactor call')
  t.match(logged('/proxy/slow'), /"status":200.*"shutdown":"draining"/, 'and to the call that finished in the grace')
})

t.test('readiness goes down as soon as the drain starts', async (t) => {
  const app = await startTestApp(t)
  const drain = new Drain()
  const server = http.createServer(buildApp(app.services, drain).callback())
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  t.teardown(() => server.close())
  const readyz = async () => fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/readyz`)
  t.equal((await readyz()).status, 200)
  drain.draining = true
  const res = await readyz()
  t.equal(res.status, 503)
  t.match(await res.json(), { status: 'down', components: { serving: 'down', database: 'ok' } })
})

t.test('SIGTERM to the whole process group (Ctrl-C, systemd): the Reactor runtime stays for the drain, and a call in flight finishes', { timeout: 120_000 }, async (t) => {
  const env: Record<string, string> = { ...(await installation(t, true)), SVC_SHUTDOWN_GRACE_MS: '10000', SVC_LOG_LEVEL: 'info' }
  const svc = await spawnService(t, env, { detached: true })
  const admin = env.SVC_BOOTSTRAP_API_KEY!
  const key = await privateKey(svc, admin)
  const code = 'module.exports = async function () { const end = Date.now() + 1500; while (Date.now() < end) {} return { raw: "finished" } }'
  const reactor = await fetch(`${svc.base}/reactors`, json(admin, { name: 'busy', code }))
  t.equal(reactor.status, 201)
  const reactorId = ((await reactor.json()) as { id: string }).id
  const call = fetch(`${svc.base}/reactors/${reactorId}/react`, json(key, { args: {} }))
  await new Promise((resolve) => setTimeout(resolve, 500))
  // As a terminal's Ctrl-C or systemd's KillMode=control-group: every process of the group.
  process.kill(-svc.child.pid!, 'SIGTERM')
  const answer = await call
  t.equal(answer.status, 200, 'the call in flight finishes within the grace')
  t.same(await answer.json(), { raw: 'finished' })
  t.equal((await svc.exited).code, 0, 'exit 0')
})
