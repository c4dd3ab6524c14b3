import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync } from 'node:fs'
import http from 'node:http'
import net, { type AddressInfo } from 'node:net'
import path from 'node:path'
import t from 'tap'
import { generateApiKey } from '../../src/auth/api-keys.js'
import { processStorage } from '../helpers/cli.js'
import { spawnService } from '../helpers/service-process.js'
import { until } from '../helpers/wait.js'

type Tap = { teardown(fn: () => unknown): void }
const backend = process.env.DATABASE_URL ? 'Postgres' : 'PGlite'

/** One installation's storage, reused across restarts: a data dir, and a schema of its own on Postgres. */
const installation = (t: Tap) => processStorage(t, 'drain', { SVC_RATE_LIMIT_ENABLED: 'false', SVC_LOG_LEVEL: 'info' })

async function withSecrets(t: Tap): Promise<Record<string, string>> {
  return {
    ...(await installation(t)),
    SVC_BOOTSTRAP_API_KEY: generateApiKey(),
    SVC_MASTER_KEY: `k1:${randomBytes(32).toString('base64')}`,
    SVC_KEY_HASH_SECRET: randomBytes(32).toString('hex'),
  }
}

async function privateKey(base: string, adminKey: string): Promise<string> {
  const rules = [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:use'] }]
  const res = await fetch(`${base}/applications`, { method: 'POST', headers: { 'SVC-API-KEY': adminKey, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'caller', type: 'private', rules }) })
  if (res.status !== 201) throw new Error(`creating an Application: ${res.status}`)
  return ((await res.json()) as { key: string }).key
}

/** A destination that takes every request and never answers it. */
async function holdingDestination(t: Tap): Promise<{ url: string; held: http.ServerResponse[] }> {
  const held: http.ServerResponse[] = []
  const dest = http.createServer((_req, res) => void held.push(res))
  await new Promise<void>((resolve) => dest.listen(0, '127.0.0.1', resolve))
  t.teardown(() => {
    held.forEach((res) => res.destroy())
    dest.close()
  })
  return { url: `http://127.0.0.1:${(dest.address() as AddressInfo).port}`, held }
}

t.test(`a proxy call whose caller left is aborted at shutdown, not waited for: its entry is written and the database closed (${backend})`, { timeout: 60_000 }, async (t) => {
  const dest = await holdingDestination(t)
  const env: Record<string, string> = { ...(await withSecrets(t)), SVC_SHUTDOWN_GRACE_MS: '3000', SVC_PROXY_TIMEOUT_MS: '30000' }
  const admin = env.SVC_BOOTSTRAP_API_KEY!
  const first = await spawnService(t, env)
  const key = await privateKey(first.base, admin)
  const caller = new AbortController()
  const call = fetch(`${first.base}/proxy/charge`, { method: 'POST', headers: { 'SVC-API-KEY': key, 'SVC-PROXY-URL': dest.url }, body: 'x', signal: caller.signal }).catch(() => 'left')
  await until(() => dest.held.length === 1, 'the call reached the destination')
  caller.abort()
  t.equal(await call, 'left')
  // The caller is gone, so the drain finds nothing in flight while the destination still works.
  first.child.kill('SIGTERM')
  const exit = await first.exited
  t.equal(exit.code, 0)
  t.match(first.output(), /"msg":"stopped"/, 'a clean stop, not the overrun')

  const second = await spawnService(t, env)
  const res = await fetch(`${second.base}/logs?action=proxy.call`, { headers: { 'SVC-API-KEY': admin } })
  t.equal(res.status, 200)
  const entries = ((await res.json()) as { data: { status: number }[] }).data
  t.equal(entries.length, 1, 'the aborted call has its entry after the restart')
  t.equal(entries[0]?.status, 504, 'it was sent, so its outcome is unknown: the time-out status')
  second.child.kill('SIGTERM')
  t.equal((await second.exited).code, 0)
})

t.test('a connection that sent no request does not hold the drain; one still sending its request is answered', { timeout: 60_000 }, async (t) => {
  const graceMs = 4000
  const svc = await spawnService(t, { ...(await withSecrets(t)), SVC_SHUTDOWN_GRACE_MS: String(graceMs) })
  const port = Number(new URL(svc.base).port)
  // As a load balancer's or undici's pre-connected pool: connected, nothing sent.
  const idle = net.connect(port, '127.0.0.1')
  idle.on('error', () => {}) // a reset closes it as well
  const idleClosed = new Promise<void>((resolve) => idle.on('close', () => resolve()))
  const sending = net.connect(port, '127.0.0.1')
  let answer = ''
  sending.on('data', (chunk: Buffer) => (answer += chunk.toString()))
  const answered = new Promise<void>((resolve) => sending.on('close', () => resolve()))
  await Promise.all([idle, sending].map((s) => new Promise((resolve) => s.once('connect', resolve))))
  await new Promise((resolve) => sending.write('GET /healthz HTTP/1.1\r\nHost: tessera\r\n', resolve))
  // Answered after the server read what was in its sockets before: the half request included.
  t.equal((await fetch(`${svc.base}/healthz`, { headers: { connection: 'close' } })).status, 200)

  const sentAt = Date.now()
  svc.child.kill('SIGTERM')
  await idleClosed
  sending.end('\r\n')
  await answered
  t.match(answer, /^HTTP\/1\.1 200 /, 'the request begun before the drain is served')
  t.match(answer, /connection: close/i)
  const exit = await svc.exited
  t.equal(exit.code, 0)
  t.ok(exit.at - sentAt < graceMs / 2, `stopped ${exit.at - sentAt} ms after SIGTERM, well within the grace (${graceMs} ms)`)
  t.notMatch(svc.output(), /shutdown deadline/, 'without going through the deadline')
})

t.test(`a signal during the start-up stops it cleanly: exit 0, the stores closed, the data-dir lock released (${backend})`, { timeout: 60_000 }, async (t) => {
  // No secrets: the start-up writes them and says so, a line that comes before any store opens.
  const env: Record<string, string> = { ...(await installation(t)), PATH: process.env.PATH ?? '', PORT: '0' }
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], { env, stdio: ['ignore', 'pipe', 'pipe'] })
  t.teardown(() => child.kill('SIGKILL'))
  let out = ''
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()))
  child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()))
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })))
  await until(() => out.includes('generated one into the data dir'), 'the start-up began')
  child.kill('SIGTERM')
  t.same(await exited, { code: 0, signal: null }, 'exit 0, not killed by the signal')
  t.match(out, /"msg":"stopped before serving"/)
  t.notMatch(out, /tessera listening/, 'it never served')
  if (!process.env.DATABASE_URL) t.notOk(existsSync(path.join(env.SVC_DATA_DIR!, 'pglite.lock')), 'the lock is released')
})
