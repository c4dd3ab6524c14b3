import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import t from 'tap'
import { cli, masterKey } from '../helpers/cli.js'
import { closedPort } from '../helpers/stub-server.js'

// The operator CLI without a database: help, usage errors, configuration. See cli-store.test.ts for the rest.

t.test('help and usage errors', async (t) => {
  for (const argv of [['--help'], ['tenant', 'create', '--help'], ['master-key', 'rewrap', '--help'], ['migrate', '--help'], ['config', '--help'], ['audit', 'verify', '--help'], ['audit', 'prune', '--help']]) {
    const res = await cli({}, ...argv)
    t.equal(res.code, 0, `${argv.join(' ')}: exit 0`)
    t.match(res.out, /^Usage: tessera/, `${argv.join(' ')}: usage`)
  }
  const unknown = await cli({}, 'bogus')
  t.same([unknown.code, /unknown command 'bogus'/.test(unknown.err)], [2, true])
  const missing = await cli({}, 'tenant', 'create')
  t.same([missing.code, /missing required argument 'name'/.test(missing.err)], [2, true])
  // Integer options are checked while parsing, before any configuration or database is read.
  for (const [argv, message] of [
    [['master-key', 'rewrap', '--batch-size', '1.5'], '--batch-size must be an integer from 1 to 10000'],
    [['master-key', 'rewrap', '--batch-size', '12abc'], '--batch-size must be an integer from 1 to 10000'],
    [['master-key', 'rewrap', '--batch-size', '10001'], '--batch-size must be an integer from 1 to 10000'],
    [['audit', 'verify', '--retention-days', '0'], '--retention-days must be an integer from 1 to 36500'],
    [['audit', 'verify', '--retention-days', ' '], '--retention-days must be an integer from 1 to 36500'],
  ] as const) {
    const res = await cli({}, ...argv)
    t.same([res.code, res.err], [2, `tessera: ${message}`], argv.join(' '))
  }
})

t.test('config: effective values, secrets hidden; a bad variable is exit 2', async (t) => {
  const env = { SVC_MASTER_KEY: `${masterKey('k2')},${masterKey('k1')}`, SVC_OPERATOR_KEY: 'op-'.repeat(12), SVC_AUDIT_SECRET: 'audit-'.repeat(8), SVC_KEY_HASH_SECRET: 'h'.repeat(40), DATABASE_URL: 'postgres://tessera:s3cret-pw@db:5432/tessera', PORT: '8080' }
  const res = await cli(env, 'config', '--json')
  t.equal(res.code, 0)
  const shown = JSON.parse(res.out)
  t.equal(shown.port, 8080)
  t.match(shown.masterKey, /key ids k2, k1/)
  t.equal(shown.operatorKey, '(hidden)')
  t.equal(shown.databaseUrl, 'postgres://tessera:hidden@db:5432/tessera')
  t.equal(shown.audit.secret, '(hidden)')
  for (const secret of [env.SVC_MASTER_KEY.split(',')[0]!.slice(3), env.SVC_OPERATOR_KEY, env.SVC_KEY_HASH_SECRET, env.SVC_AUDIT_SECRET, 's3cret-pw']) t.notMatch(res.out, secret)
  // One bare key (it has no id of its own; the keyring calls it k1) is hidden too.
  const bare = masterKey('k1').slice(3)
  const single = await cli({ SVC_MASTER_KEY: bare, SVC_KEY_HASH_SECRET: 'h'.repeat(40) }, 'config', '--json')
  t.equal(single.code, 0, single.err)
  t.equal(JSON.parse(single.out).masterKey, '(hidden; key ids k1, the first encrypts)')
  t.notMatch(single.out + single.err, bare, 'a bare key is never printed')
  const bad = await cli({ PORT: 'abc', SVC_RATE_LIMIT_GLOBAL: 'lots' }, 'config')
  t.equal(bad.code, 2)
  t.match(bad.err, /PORT must be /)
  t.match(bad.err, /SVC_RATE_LIMIT_GLOBAL/, 'every bad variable at once')
})

t.test('the installed entry point and the npm script alias', async (t) => {
  const run = promisify(execFile)
  const res = await run(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', '--version'])
  t.equal(res.stdout.trim(), JSON.parse(readFileSync('package.json', 'utf8')).version)
  const failed = await run(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'config'], { env: { ...process.env, PORT: 'abc' } }).catch((err: { code: number; stderr: string }) => err)
  t.match(failed, { code: 2, stderr: /PORT must be / })
  const pkg = JSON.parse(readFileSync('package.json', 'utf8'))
  t.equal(pkg.bin.tessera, 'dist/src/cli/main.js')
  t.equal(pkg.scripts['rewrap-keys'], `${pkg.scripts.tessera} master-key rewrap`, 'npm run rewrap-keys is the CLI command')
  t.equal(pkg.scripts['audit-verify'], `${pkg.scripts.tessera} audit verify`)
  t.equal(pkg.scripts['audit-prune'], `${pkg.scripts.tessera} audit prune`)
})

t.test('a database that cannot be reached, or takes the connection and never answers: one clear line on stderr and the documented exit code', async (t) => {
  const run = promisify(execFile)
  // A frozen server or a partition: the connection is accepted, nothing ever comes back.
  const held: net.Socket[] = []
  const silent = net.createServer((socket) => void held.push(socket))
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve))
  t.teardown(() => {
    held.forEach((socket) => socket.destroy())
    silent.close()
  })
  for (const port of [await closedPort(), (silent.address() as net.AddressInfo).port]) {
    const env = { ...process.env, DATABASE_URL: `postgres://tessera:pw-${randomBytes(4).toString('hex')}@127.0.0.1:${port}/tessera`, SVC_KEY_HASH_SECRET: 'h'.repeat(40), SVC_MASTER_KEY: masterKey('k1'), SVC_DB_ACQUIRE_TIMEOUT_MS: '1000', SVC_LOG_LEVEL: 'silent' }
    for (const [argv, code] of [[['tenant', 'create', 'acme'], 1], [['master-key', 'rewrap'], 1], [['migrate'], 1], [['audit', 'prune'], 1], [['audit', 'verify'], 2]] as const) {
      const failed = await run(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...argv], { env, timeout: 30_000 }).then(() => ({ code: 0, stdout: '', stderr: '' }), (err: { code: number; stdout: string; stderr: string }) => err)
      t.equal(failed.code, code, `${argv.join(' ')}: exit ${code}`)
      const lines = failed.stderr.trim().split('\n')
      t.equal(lines.length, 1, `${argv.join(' ')}: one line (${JSON.stringify(failed.stderr)})`)
      t.match(lines[0], /^tessera: .*The database did not answer in time; nothing was changed/, `${argv.join(' ')}: the usual words, not the driver's`)
      t.equal(failed.stdout, '', `${argv.join(' ')}: nothing on stdout (no driver warnings, no stack traces)`)
      t.notMatch(failed.stderr, env.DATABASE_URL.split(':')[2]!.split('@')[0]!, 'never the password')
    }
  }
})

t.test('a missing secret is exit 2 naming it, before any database is opened; nothing is generated', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tessera-cli-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  // An unreachable database: reaching it would be exit 1 (or 2 for verify, with another message).
  const env = { SVC_DATA_DIR: dir, DATABASE_URL: `postgres://tessera@127.0.0.1:${await closedPort()}/tessera`, SVC_LOG_LEVEL: 'silent' }
  const file = path.join(dir, 'secrets.json')
  for (const [argv, variable] of [[['tenant', 'create', 'acme'], 'SVC_KEY_HASH_SECRET'], [['master-key', 'rewrap'], 'SVC_MASTER_KEY'], [['audit', 'verify'], 'SVC_KEY_HASH_SECRET']] as const) {
    const res = await cli(env, ...argv)
    t.equal(res.code, 2, `${argv.join(' ')}: exit 2`)
    t.equal(res.out, '')
    t.match(res.err, /^tessera: /)
    t.match(res.err, `${variable} is not set and ${file} does not exist`, `${argv.join(' ')}: names ${variable}`)
  }
  t.notOk(existsSync(file), 'no secrets.json was written')
})
