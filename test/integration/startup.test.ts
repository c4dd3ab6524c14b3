import { spawn, spawnSync } from 'node:child_process'
import http from 'node:http'
import net from 'node:net'
import type { AddressInfo } from 'node:net'
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import t from 'tap'
import { generateApiKey } from '../../src/auth/api-keys.js'
import { testConfig } from '../../src/config/index.js'
import { resolveSecrets } from '../../src/config/secrets.js'
import { createLogger } from '../../src/logger.js'
import { presentToken } from '../../src/http/presenters/tokens.js'
import { openServices } from '../../src/services.js'

t.test('a bad configuration exits non-zero naming every bad variable', async (t) => {
  const res = spawnSync(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    env: { PATH: process.env.PATH, PORT: 'x', SVC_BODY_LIMIT_BYTES: '-1', SVC_MASTER_KEY: 'k1:short', SVC_TRUSTED_PROXIES: 'proxy.local' },
    encoding: 'utf8',
    timeout: 60_000,
  })
  t.equal(res.status, 2)
  t.match(res.stderr, /PORT/)
  t.match(res.stderr, /SVC_BODY_LIMIT_BYTES/)
  t.match(res.stderr, /SVC_MASTER_KEY: entry 1 \(k1\)/, 'the master key fails at load, not when the vault opens')
  t.match(res.stderr, /SVC_TRUSTED_PROXIES: "proxy.local"/, 'trusted proxies fail at load, not when the app is built')
})

t.test('an address that cannot be listened on: one line naming the variables, no stack, exit 1', { timeout: 180_000 }, async (t) => {
  const busy = net.createServer()
  await new Promise<void>((r) => busy.listen(0, '127.0.0.1', r))
  t.teardown(() => busy.close())
  const port = (busy.address() as AddressInfo).port
  const cases: Array<[Record<string, string>, RegExp]> = [
    [{ HOST: 'no-such-host.invalid', PORT: '0' }, /^tessera failed to start: cannot listen on HOST=no-such-host\.invalid PORT=0: host name (not found|lookup failed)$/m],
    [{ PORT: String(port) }, new RegExp(`^tessera failed to start: cannot listen on HOST=127\\.0\\.0\\.1 PORT=${port}: address in use$`, 'm')],
    [{ PORT: '0', SVC_METRICS: 'port', SVC_METRICS_PORT: String(port) }, new RegExp(`^tessera failed to start: cannot listen on SVC_METRICS_HOST=127\\.0\\.0\\.1 SVC_METRICS_PORT=${port}: address in use$`, 'm')],
  ]
  // In parallel (each its own data dir): each child opens its store before it listens.
  await Promise.all(cases.map(async ([env, line]) => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'tessera-'))
    t.teardown(() => rmSync(dir, { recursive: true, force: true }))
    // Async, so this process keeps accepting on the busy port while the child tries it.
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], { env: { PATH: process.env.PATH, SVC_DATA_DIR: dir, SVC_LOG_LEVEL: 'silent', ...env }, stdio: ['ignore', 'ignore', 'pipe'] })
    t.teardown(() => child.kill('SIGKILL'))
    let stderr = ''
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    const code = await new Promise<number | null>((r) => child.on('exit', r))
    t.equal(code, 1, JSON.stringify(env))
    t.match(stderr, line)
    t.notMatch(stderr, /Unhandled|\n\s+at /, 'no stack trace')
  }))
})

t.test('embedded data survives a restart, and the bootstrap runs once', { skip: process.env.DATABASE_URL ? 'embedded only' : false }, async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tessera-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const key = generateApiKey()
  const config = testConfig({ SVC_DATA_DIR: dir, SVC_BOOTSTRAP_API_KEY: key })
  const secrets = resolveSecrets(config)
  t.same(secrets.generated.sort(), ['key_hash_secret', 'master_key'])
  const first = await openServices(config, createLogger(config), secrets, { presentToken })
  const principal = await first.authenticator.authenticate(key)
  await first.close()

  const again = resolveSecrets(config)
  t.same(again.generated, [], 'secrets are reused from the data dir')
  const second = await openServices(config, createLogger(config), again, { presentToken })
  t.teardown(() => second.close())
  t.equal((await second.authenticator.authenticate(key)).id, principal.id, 'same Application after restart')
  t.equal(await second.store.tenants.count(), 1, 'bootstrap did not run twice')
})

t.test("the data dir's secrets and embedded database are the server user's alone", { skip: process.env.DATABASE_URL ? 'embedded only' : false }, async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tessera-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const mode = (file: string) => statSync(file).mode & 0o777
  // As an operator might leave them: a directory made under umask 022, a secrets file restored from a backup.
  chmodSync(dir, 0o755)
  mkdirSync(path.join(dir, 'pglite'), { mode: 0o755 })
  chmodSync(path.join(dir, 'pglite'), 0o755)
  writeFileSync(path.join(dir, 'secrets.json'), JSON.stringify({ key_hash_secret: 'h'.repeat(44) }), { mode: 0o644 })
  chmodSync(path.join(dir, 'secrets.json'), 0o644)

  const config = testConfig({ SVC_DATA_DIR: dir })
  const secrets = resolveSecrets(config)
  t.same(secrets.generated, ['master_key'])
  t.equal(mode(path.join(dir, 'secrets.json')), 0o600, 'the file that now holds the master key is 0600, whatever it was')
  t.same(Object.keys(JSON.parse(readFileSync(path.join(dir, 'secrets.json'), 'utf8')) as object).sort(), ['key_hash_secret', 'master_key'], 'both secrets in it')
  const services = await openServices(config, createLogger(config), secrets, { presentToken })
  t.teardown(() => services.close())
  t.equal(mode(path.join(dir, 'pglite')), 0o700, 'the database files (the WAL too) are reachable by no other user')

  const fresh = path.join(dir, 'fresh')
  resolveSecrets(testConfig({ SVC_DATA_DIR: fresh }))
  t.equal(mode(fresh), 0o700, 'a data dir the server makes is 0700')
  t.equal(mode(path.join(fresh, 'secrets.json')), 0o600)
})

t.test('two servers starting at once on a new data dir keep the one master key on disk', { skip: process.env.DATABASE_URL ? 'embedded only' : false }, async (t) => {
  // Each generated its own secrets and the last to write won: the other ran under a master key
  // no disk held (its tokens unreadable after a restart).
  const child = `const { resolveSecrets } = await import(${JSON.stringify(path.resolve('src/config/secrets.ts'))});
    const [dir, go] = process.argv.slice(-2); while (Date.now() < Number(go)) {}
    process.stdout.write(JSON.stringify(resolveSecrets({ dataDir: dir, masterKey: undefined, keyHashSecret: undefined })))`
  for (let round = 0; round < 3; round++) {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'tessera-'))
    t.teardown(() => rmSync(dir, { recursive: true, force: true }))
    const go = String(Date.now() + 2500)
    const answers = await Promise.all(
      [0, 1].map(
        () =>
          new Promise<{ masterKey: string; keyHashSecret: string }>((resolve, reject) => {
            const p = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', child, dir, go], { stdio: ['ignore', 'pipe', 'inherit'] })
            let out = ''
            p.stdout.on('data', (d: Buffer) => (out += d.toString()))
            p.on('close', (code) => (code === 0 ? resolve(JSON.parse(out) as { masterKey: string; keyHashSecret: string }) : reject(new Error(`exit ${code}`))))
          }),
      ),
    )
    const onDisk = JSON.parse(readFileSync(path.join(dir, 'secrets.json'), 'utf8')) as { master_key: string; key_hash_secret: string }
    for (const answer of answers) t.same([answer.masterKey, answer.keyHashSecret], [onDisk.master_key, onDisk.key_hash_secret], `round ${round}: each process runs under the secrets on disk`)
  }
})

t.test('SIGTERM drains in-flight requests, then exits 0', { timeout: 60_000 }, async (t) => {
  let arrived: () => void = () => undefined
  const reached = new Promise<void>((r) => (arrived = r))
  // A destination that answers only after the server was told to stop.
  let answer: () => void = () => undefined
  const dest = http.createServer((_req, res) => {
    answer = () => res.end('slow answer')
    arrived()
  })
  await new Promise<void>((r) => dest.listen(0, '127.0.0.1', r))
  t.teardown(() => dest.close())
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tessera-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const key = generateApiKey()
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    PORT: '0',
    SVC_DATA_DIR: dir,
    SVC_BOOTSTRAP_API_KEY: key,
    SVC_PROXY_ALLOW_HTTP: 'true',
    SVC_PROXY_ALLOW_PRIVATE: 'true',
  }
  // Draining is the same on both backends; PGlite keeps the child off any shared database.
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], { env, stdio: ['ignore', 'pipe', 'pipe'] })
  t.teardown(() => child.kill('SIGKILL'))
  let out = ''
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString()
      const m = /"port":(\d+)/.exec(out)
      if (m) resolve(Number(m[1]))
    })
    child.on('exit', () => reject(new Error(`exited early: ${out}`)))
  })
  const base = `http://127.0.0.1:${port}`
  const created = await fetch(`${base}/applications`, {
    method: 'POST',
    headers: { 'SVC-API-KEY': key, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'p', type: 'private', permissions: ['token:use'] }),
  })
  t.equal(created.status, 201)
  const privateKey = ((await created.json()) as { key: string }).key
  const inFlight = fetch(`${base}/proxy`, {
    method: 'POST',
    headers: { 'SVC-API-KEY': privateKey, 'SVC-PROXY-URL': `http://127.0.0.1:${(dest.address() as AddressInfo).port}` },
    body: 'x',
  })
  await reached
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)))
  child.kill('SIGTERM')
  await new Promise<void>((r) => child.stdout.on('data', (chunk: Buffer) => chunk.toString().includes('draining') && r()))
  answer()
  const res = await inFlight
  t.equal(res.status, 200)
  t.equal(await res.text(), 'slow answer', 'the in-flight request completed')
  t.equal(await exited, 0, 'clean exit')
})
