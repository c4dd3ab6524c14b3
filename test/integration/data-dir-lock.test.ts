import { spawn, spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, utimesSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { pino } from 'pino'
import t, { type Test } from 'tap'
import { generateApiKey } from '../../src/auth/api-keys.js'
import { lockDataDir } from '../../src/store/data-dir-lock.js'
import { cli, masterKey } from '../helpers/cli.js'
import { spawnService, type ServiceProcess } from '../helpers/service-process.js'

// The embedded PGlite is one process: whoever opens its data directory owns it until it closes.
const skip = process.env.DATABASE_URL ? 'embedded PGlite only' : false

/** One installation's environment: a data directory of its own and explicit secrets (nothing generated). */
function installation(t: Test): Record<string, string> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tessera-lock-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return {
    SVC_DATA_DIR: dir,
    SVC_BOOTSTRAP_API_KEY: generateApiKey(),
    SVC_MASTER_KEY: masterKey('k1'),
    SVC_KEY_HASH_SECRET: randomBytes(32).toString('hex'),
    SVC_RATE_LIMIT_ENABLED: 'false',
  }
}

const call = (svc: ServiceProcess, key: string, route: string, body?: unknown) =>
  fetch(`${svc.base}${route}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { 'SVC-API-KEY': key, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  })

/** An Application that may write and read tokens, and one token written with it. */
async function written(t: Test, svc: ServiceProcess, admin: string): Promise<{ key: string; token: string }> {
  const rules = [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read'] }]
  const app = await call(svc, admin, '/applications', { name: 'writer', type: 'private', rules })
  t.equal(app.status, 201)
  const key = ((await app.json()) as { key: string }).key
  const token = await call(svc, key, '/tokens', { type: 'token', data: 'kept' })
  t.equal(token.status, 201)
  return { key, token: ((await token.json()) as { id: string }).id }
}

async function stop(t: Test, svc: ServiceProcess): Promise<void> {
  svc.child.kill('SIGTERM')
  t.equal((await svc.exited).code, 0, 'the holder stops cleanly')
}

t.test('a second opener fails at once naming the directory; the holder keeps serving; SIGTERM frees it', { skip, timeout: 120_000 }, async (t) => {
  const env = installation(t)
  const first = await spawnService(t, env)
  const before = await written(t, first, env.SVC_BOOTSTRAP_API_KEY!)
  const held = `another Tessera process \\(pid ${first.child.pid}\\) holds the data directory ${realpathSync(env.SVC_DATA_DIR!)}/pglite`

  const second = spawnSync(process.execPath, ['--import', 'tsx', 'src/main.ts'], { env: { PATH: process.env.PATH, PORT: '0', ...env }, encoding: 'utf8', timeout: 60_000 })
  t.equal(second.status, 1, 'a second server exits non-zero')
  t.match(second.stderr, new RegExp(`^tessera failed to start: ${held}; the embedded PGlite allows one process at a time: stop it first\\n$`), 'one line, no stack')
  t.notMatch(second.stdout, /waiting for its lock/, 'at once: the holder is alive, so nothing to wait for')

  const cliEnv = { SVC_DATA_DIR: env.SVC_DATA_DIR!, SVC_MASTER_KEY: env.SVC_MASTER_KEY!, SVC_KEY_HASH_SECRET: env.SVC_KEY_HASH_SECRET!, SVC_LOG_LEVEL: 'silent' }
  const created = await cli(cliEnv, 'tenant', 'create', 'acme')
  t.equal(created.code, 1, 'a CLI command fails too')
  t.match(created.err, new RegExp(`^tessera: ${held}`))
  t.equal(created.out, '', 'and prints no key')
  t.equal((await cli(cliEnv, 'master-key', 'rewrap')).code, 1)

  const after = await call(first, before.key, `/tokens/${before.token}`)
  t.equal(after.status, 200, 'the holder still serves what it wrote')
  t.equal((await call(first, before.key, '/tokens', { type: 'token', data: 'more' })).status, 201, 'and writes')
  await stop(t, first)

  t.equal((await cli(cliEnv, 'tenant', 'create', 'acme')).code, 0, 'the refused CLI wrote nothing (the name is free); the lock was released')
  const next = await spawnService(t, env)
  const read = await call(next, before.key, `/tokens/${before.token}`)
  t.equal(read.status, 200, 'every acknowledged write is there')
  t.match(await read.json(), { data: 'kept' })
  await stop(t, next)
})

t.test('after kill -9 of the holder, its stale lock does not stop the next start', { skip, timeout: 120_000 }, async (t) => {
  const env = installation(t)
  const first = await spawnService(t, env)
  const before = await written(t, first, env.SVC_BOOTSTRAP_API_KEY!)
  first.child.kill('SIGKILL')
  await first.exited
  t.ok(existsSync(path.join(env.SVC_DATA_DIR!, 'pglite.lock')), 'the crash left its lock behind')

  const next = await spawnService(t, env)
  t.equal((await call(next, before.key, `/tokens/${before.token}`)).status, 200)
  await stop(t, next)
})

// A server starts slowly enough that the lock a crash left may already be stale by then: here it is fresh.
t.test('a fresh lock whose owner is gone: the opener waits for it to go stale, then takes it', { skip }, async (t) => {
  const dir = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'tessera-lock-')))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const pglite = path.join(dir, 'pglite')
  mkdirSync(pglite)
  const gone = spawnSync(process.execPath, ['-e', '']).pid
  mkdirSync(`${pglite}.lock`)
  writeFileSync(`${pglite}.owner`, JSON.stringify({ pid: gone, host: os.hostname() }))
  const lines: string[] = []
  const release = await lockDataDir(pglite, pino({}, { write: (line: string) => void lines.push(line) }))
  t.match(lines.join(''), /waiting for its lock to go stale/)
  t.match(JSON.parse(readFileSync(`${pglite}.owner`, 'utf8')), { pid: process.pid }, 'it is the owner now')
  await release()
  t.notOk(existsSync(`${pglite}.lock`), 'released: the lock is gone')
  t.notOk(existsSync(`${pglite}.owner`))
})

/** A data dir whose lock was last refreshed a minute ago: stale by its time alone. */
function staleLock(t: Test): string {
  const dir = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'tessera-lock-')))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const pglite = path.join(dir, 'pglite')
  mkdirSync(pglite)
  mkdirSync(`${pglite}.lock`)
  const old = new Date(Date.now() - 60_000)
  utimesSync(`${pglite}.lock`, old, old)
  return pglite
}

// PGlite's first start holds the event loop long enough for its lock to look stale (10-20 s seen).
t.test('a lock that looks stale but whose owner lives is never taken over', { skip }, async (t) => {
  const pglite = staleLock(t)
  const holder = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 30_000)'])
  t.teardown(() => holder.kill())
  const live = holder.pid!
  writeFileSync(`${pglite}.owner`, JSON.stringify({ pid: live, host: os.hostname() }))
  await t.rejects(lockDataDir(pglite), { name: 'DataDirInUseError', message: new RegExp(`pid ${live}\\)`) })
  t.match(JSON.parse(readFileSync(`${pglite}.owner`, 'utf8')), { pid: live }, 'the owner is still the live one')
})

t.test("a stale lock whose owner's pid now belongs to another program is taken over", { skip: skip || (!existsSync('/proc/self/cmdline') && 'needs /proc') }, async (t) => {
  const pglite = staleLock(t)
  const other = spawn('sleep', ['30'])
  t.teardown(() => other.kill())
  writeFileSync(`${pglite}.owner`, JSON.stringify({ pid: other.pid, host: os.hostname() }))
  const release = await lockDataDir(pglite)
  t.match(JSON.parse(readFileSync(`${pglite}.owner`, 'utf8')), { pid: process.pid })
  await release()
})
