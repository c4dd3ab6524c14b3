import { spawn } from 'node:child_process'
import { existsSync, rmSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import pg from 'pg'
import t, { type Test } from 'tap'
import { apiKeyHasher, generateApiKey } from '../../src/auth/api-keys.js'
import { withStore } from '../../src/cli/context.js'
import { testConfig } from '../../src/config/index.js'
import { resolveSecrets } from '../../src/config/secrets.js'
import { createLogger } from '../../src/logger.js'
import { presentToken } from '../../src/http/presenters/tokens.js'
import { openServices } from '../../src/services.js'
import type { Store } from '../../src/store/index.js'
import { tenantsService } from '../../src/tenants/service.js'
import { auditRows } from '../helpers/audit.js'
import { cli, masterKey, migratedStorage, processStorage } from '../helpers/cli.js'
import { card } from '../helpers/tokens.js'

// The operator CLI on a real database (PGlite, or Postgres with DATABASE_URL).


/** The services a server on the same storage would open. */
async function serverOn(t: Test, env: Record<string, string>) {
  const config = testConfig(env)
  const services = await openServices(config, createLogger(config), { masterKey: config.masterKey!, keyHashSecret: config.keyHashSecret! }, { presentToken })
  t.teardown(() => services.close())
  return services
}

t.test('migrate: lists, applies, then reports up to date', async (t) => {
  const env = await processStorage(t, 'cli')
  const before = await cli(env, 'migrate', '--list')
  t.equal(before.code, 0)
  t.match(before.out, /pending {2}20261122000000_foundation/)
  t.notMatch(before.out, /applied/)
  const ran = await cli(env, 'migrate')
  t.equal(ran.code, 0)
  t.match(ran.out, /applied {2}20261125000000_idempotency/)
  const again = await cli(env, 'migrate')
  t.match(again.out, /the schema is up to date/)
})

t.test('tenant create prints a management key a server accepts', async (t) => {
  const env = { ...(await migratedStorage(t, 'cli')), SVC_MASTER_KEY: masterKey('k1') }
  const res = await cli(env, 'tenant', 'create', 'acme', '--json')
  t.equal(res.code, 0, res.err)
  const created = JSON.parse(res.out)
  t.match(created.key, /^tsr_mgmt_[A-Za-z0-9]{43}$/)
  const services = await serverOn(t, env)
  const principal = await services.authenticator.authenticate(created.key)
  t.same([principal.tenantId, principal.type], [created.tenant.id, 'management'])
  await services.close()
  const dup = await cli(env, 'tenant', 'create', 'acme')
  t.same([dup.code, dup.err], [1, 'tessera: a tenant named "acme" exists'])
  const bad = await cli(env, 'tenant', 'create', 'x'.repeat(201))
  t.equal(bad.code, 2)
})

t.test('tenant create records tenant.create and its Application\'s application.create before it prints the key', async (t) => {
  const env = { ...(await migratedStorage(t, 'cli')), SVC_MASTER_KEY: masterKey('k1') }
  const res = await cli(env, 'tenant', 'create', 'acme', '--json')
  t.equal(res.code, 0, res.err)
  const created = JSON.parse(res.out)
  const services = await serverOn(t, env)
  const rows = await auditRows({ services }, created.tenant.id)
  const operator = { actor_kind: 'operator', actor_id: null, outcome: 'success', status: 201, request_route: null, client_ip: null }
  t.match(rows, [
    { ...operator, action: 'tenant.create', target_type: 'tenant', target_ids: [created.tenant.id] },
    { ...operator, action: 'application.create', target_type: 'application', target_ids: [created.application.id] },
  ])
  t.same(rows.map((r) => Number(r.seq)), [1, 2], 'the first entries of the new tenant\'s chain')
  t.notOk(JSON.stringify(rows).includes(created.key), 'not the new key')
  t.ok((await services.audit.verify({ tenantId: created.tenant.id })).ok, 'sealed as the servers seal')
})

t.test('tenant create whose entries cannot be written fails, never prints the key and leaves no tenant, so a retry works', async (t) => {
  const env = { ...(await migratedStorage(t, 'cli')), SVC_MASTER_KEY: masterKey('k1') }
  await auditTable(env, 'audit_events', 'audit_events_away')
  const res = await cli(env, 'tenant', 'create', 'acme', '--json')
  await auditTable(env, 'audit_events_away', 'audit_events')
  t.same([res.code, res.out], [1, ''], 'exit 1, nothing on stdout')
  t.match(res.err, /^tessera: tenant "acme" could not be created \(no key is shown\): the audit log could not record it/m)
  t.notMatch(res.err, /tsr_/, 'no key on stderr either')
  t.same(await onStore(env, (knex) => knex('tenants').where({ name: 'acme' })), [], 'no tenant left')
  t.same(await onStore(env, (knex) => knex('applications').where({ name: 'acme management' })), [], 'nor its Application')

  const again = await cli(env, 'tenant', 'create', 'acme', '--json')
  t.equal(again.code, 0, again.err)
  const created = JSON.parse(again.out)
  const actions = await onStore(env, (knex) => knex('audit_events').where({ tenant_id: created.tenant.id }).orderBy('seq').pluck('action'))
  t.same(actions, ['tenant.create', 'application.create'])
})

t.test('a bootstrap whose entries cannot be written: the server fails to start, prints no key and leaves no tenant; the next start creates default', async (t) => {
  const env = { ...(await processStorage(t, 'cli')), SVC_MASTER_KEY: masterKey('k1') }
  t.equal((await cli(env, 'migrate')).code, 0, 'the schema, and no tenant yet')
  await auditTable(env, 'audit_events', 'audit_events_away')
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    env: { PATH: process.env.PATH ?? '', ...env, PORT: '0', SVC_LOG_LEVEL: 'info', SVC_AUDIT_WRITE_TIMEOUT_MS: '2000' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  t.teardown(() => child.kill('SIGKILL'))
  let out = ''
  let err = ''
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()))
  child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()))
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve))
  await auditTable(env, 'audit_events_away', 'audit_events')
  t.equal(code, 1, err)
  t.match(err, /^tessera failed to start: could not create tenant "default": The audit log cannot be written/m)
  t.notMatch(out + err, /tsr_|shown once/, 'no key printed or logged')
  t.notMatch(out, /tessera listening/)
  t.same(await onStore(env, (knex) => knex('tenants').pluck('name')), [], 'no tenant left')
  t.same(await onStore(env, (knex) => knex('applications').pluck('id')), [], 'nor an Application')

  const services = await serverOn(t, { ...env, SVC_BOOTSTRAP_API_KEY: generateApiKey() })
  const principal = await services.authenticator.authenticate(services.config.bootstrapApiKey)
  t.match(await auditRows({ services }, principal.tenantId), [
    { action: 'tenant.create', actor_kind: 'operator', target_ids: [principal.tenantId] },
    { action: 'application.create', actor_kind: 'operator', target_ids: [principal.id] },
  ])
})

t.test('a first start killed while its entries wait leaves no tenant (they commit together); the next start creates default', { skip: process.env.DATABASE_URL ? false : 'needs a second session on the database' }, async (t) => {
  const env: Record<string, string> = { ...(await processStorage(t, 'cli')), SVC_MASTER_KEY: masterKey('k1') }
  t.equal((await cli(env, 'migrate')).code, 0, 'the schema, and no tenant yet')
  // Another session holds the chain heads, so the first start's entries wait for it.
  const holder = new pg.Client({ connectionString: env.DATABASE_URL })
  await holder.connect()
  t.teardown(() => holder.end())
  await holder.query('begin')
  await holder.query('lock table audit_chain_heads in exclusive mode')
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    env: { PATH: process.env.PATH ?? '', ...env, PORT: '0', SVC_AUDIT_WRITE_TIMEOUT_MS: '60000' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  t.teardown(() => child.kill('SIGKILL'))
  let out = ''
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()))
  const waiter = async (): Promise<number | undefined> => {
    const { rows } = await holder.query<{ pid: number }>(
      "select l.pid from pg_locks l join pg_class c on c.oid = l.relation where c.relname = 'audit_chain_heads' and c.relnamespace = to_regnamespace(current_schema()) and not l.granted",
    )
    return rows[0]?.pid
  }
  let pid: number | undefined
  for (let i = 0; i < 600 && pid === undefined; i++) {
    pid = await waiter()
    if (pid === undefined) await new Promise((resolve) => setTimeout(resolve, 100))
  }
  t.ok(pid, 'the first start waits to write its entries')
  // The process dies there (a crash, a kill -9), then the other session lets go.
  child.kill('SIGKILL')
  await new Promise((resolve) => child.once('exit', resolve))
  await holder.query('rollback')
  for (let i = 0; i < 100 && (await holder.query('select 1 from pg_stat_activity where pid = $1', [pid])).rowCount; i++) await new Promise((resolve) => setTimeout(resolve, 100))
  t.notMatch(out, /tsr_|shown once/, 'no key printed')
  t.same(await onStore(env, (knex) => knex('tenants').pluck('name')), [], 'no tenant stands without its entries')
  t.same(await onStore(env, (knex) => knex('audit_events').pluck('action')), [], 'and no entries')

  const services = await serverOn(t, { ...env, SVC_BOOTSTRAP_API_KEY: generateApiKey() })
  const principal = await services.authenticator.authenticate(services.config.bootstrapApiKey)
  t.match(await auditRows({ services }, principal.tenantId), [{ action: 'tenant.create' }, { action: 'application.create' }], 'the next start creates and records default')
})

t.test('a bootstrap whose record is refused leaves no tenant default and logs nothing about its key', async (t) => {
  const env = { ...(await migratedStorage(t, 'cli')), SVC_MASTER_KEY: masterKey('k1') }
  const config = testConfig(env)
  const lines: string[] = []
  const logger = createLogger({ ...config, logLevel: 'info' }, { write: (line: string) => void lines.push(line) })
  const refused = new Error('refused for the test')
  const audit = { record: async () => Promise.reject(refused), recordIn: async () => Promise.reject(refused), note: () => undefined }
  const key = generateApiKey()
  await withStore(config, async (store) => {
    const tenants = tenantsService({ store, hasher: apiKeyHasher(config.keyHashSecret!), settings: { invalidate: async () => undefined }, logger })
    const failed = await tenants.bootstrap(key, audit).then(() => undefined, (e: unknown) => e)
    t.match(failed, { message: 'could not create tenant "default": refused for the test', cause: refused })
    t.equal(await store.tenants.count(), 0, 'no tenant left')
    t.same(await store.db.knex('applications').pluck('id'), [], 'nor its Application')
    t.notMatch(lines.join('\n'), /SVC_BOOTSTRAP_API_KEY/, 'the key is not said to be in use')
    await tenants.bootstrap(key, { record: async () => undefined, recordIn: async () => undefined, note: () => undefined })
    t.same(await store.db.knex('tenants').pluck('name'), ['default'], 'the next attempt creates it')
  })
})

/** Renames an audit table on `env`'s storage (as an operator could), without a server. */
async function auditTable(env: Record<string, string>, from: string, to: string): Promise<void> {
  await onStore(env, (knex) => knex.raw(`alter table ${from} rename to ${to}`))
}

/** Runs `fn` on `env`'s database, opened as the CLI opens it (no bootstrap), then closes it. */
function onStore<T>(env: Record<string, string>, fn: (knex: Store['db']['knex']) => Promise<T>): Promise<T> {
  return withStore(testConfig(env), (store) => fn(store.db.knex))
}

/** A server on `env` stores `count` card tokens in a new tenant, then stops (so the CLI may open the data dir). */
async function storeCards(t: Test, env: Record<string, string>, count: number): Promise<void> {
  const server = await serverOn(t, env)
  const admin = await server.tenants.createTenant('vault')
  const principal = await server.authenticator.authenticate(admin.key)
  const writer = { ...principal, type: 'private' as const, permissions: ['token:create', 'token:read'], rules: [] }
  for (let i = 0; i < count; i++) await server.tokens.createToken(writer, { type: 'card', data: card() })
  await server.close()
}

t.test('master-key rewrap: progress, every data key moved, safe to repeat', async (t) => {
  const env = await processStorage(t, 'cli')
  const k1 = masterKey('k1')
  await storeCards(t, { ...env, SVC_MASTER_KEY: k1 }, 7)

  const rotated = { ...env, SVC_MASTER_KEY: `${masterKey('k2')},${k1}` }
  const res = await cli(rotated, 'master-key', 'rewrap', '--batch-size', '3')
  t.equal(res.code, 0, res.err)
  t.match(res.err, /7 data key\(s\) to re-wrap under k2/)
  t.match(res.err, /re-wrapped 3\/7 \(43%\)/, 'progress per batch')
  t.match(res.out, /done: 7 data key\(s\) now under k2/)
  t.match((await cli(rotated, 'master-key', 'rewrap')).out, /done: 0 data key/, 'nothing left on a second run')

  const wrong = await cli({ ...env, SVC_MASTER_KEY: masterKey('k9') }, 'master-key', 'rewrap')
  t.equal(wrong.code, 1, 'a master key that does not open the database')
  t.match(wrong.err, /^tessera: master key k2 is not configured$/m, 'says which key is missing')
  // k2 was never recorded by a server, but the rewrap that wrapped under it recorded its check value.
  const wrongNew = await cli({ ...env, SVC_MASTER_KEY: `${masterKey('k2')},${k1}` }, 'master-key', 'rewrap')
  t.same([wrongNew.code, wrongNew.out], [1, ''])
  t.match(wrongNew.err, /^tessera: master key k2 does not match the key this database was encrypted with/m)
  t.equal((await cli({ ...env, SVC_MASTER_KEY: 'not-a-keyring' }, 'master-key', 'rewrap')).code, 2)
  t.equal((await cli(rotated, 'master-key', 'rewrap', '--batch-size', '0')).code, 2)
})

t.test('master-key rewrap: a wrong key under the id already primary fails, reporting nothing', async (t) => {
  const env = await processStorage(t, 'cli')
  const k1 = masterKey('k1')
  await storeCards(t, { ...env, SVC_MASTER_KEY: k1 }, 3)

  // Nothing is under another key, so nothing would be re-wrapped: the key must still be proven.
  const wrong = await cli({ ...env, SVC_MASTER_KEY: masterKey('k1') }, 'master-key', 'rewrap')
  t.same([wrong.code, wrong.out], [1, ''], 'exit 1, no "done"')
  t.equal(wrong.err, 'tessera: master key k1 does not match the key this database was encrypted with')
  const right = await cli({ ...env, SVC_MASTER_KEY: k1 }, 'master-key', 'rewrap')
  t.equal(right.code, 0, right.err)
  t.match(right.out, /done: 0 data key\(s\) now under k1/)
})

t.test('the CLI never generates secrets: the environment, else secrets.json, else exit 2', async (t) => {
  const { SVC_KEY_HASH_SECRET: _unset, ...env } = await migratedStorage(t, 'cli')
  const file = path.join(env.SVC_DATA_DIR!, 'secrets.json')
  const missing = await cli(env, 'tenant', 'create', 'acme')
  t.same([missing.code, missing.out], [2, ''])
  t.equal(missing.err, `tessera: SVC_KEY_HASH_SECRET is not set and ${file} does not exist: set it to the servers' value (operator commands never generate secrets)`)
  t.match((await cli(env, 'master-key', 'rewrap')).err, `SVC_MASTER_KEY is not set and ${file} does not exist`)
  t.notOk(existsSync(file), 'nothing generated')
  writeFileSync(file, JSON.stringify({ master_key: masterKey('k1') }))
  const partial = await cli(env, 'tenant', 'create', 'acme')
  t.same([partial.code, partial.err], [2, `tessera: SVC_KEY_HASH_SECRET is not set and ${file} holds no key_hash_secret: set it to the servers' value (operator commands never generate secrets)`])

  // A file that is not JSON is named, and the text around the fault (a key, perhaps) is not quoted.
  const pasted = masterKey('k1')
  writeFileSync(file, `{"master_key": ${pasted}}`)
  const corrupt = await cli(env, 'tenant', 'create', 'acme')
  t.same([corrupt.code, corrupt.err], [2, `tessera: cannot read ${file}: it is not valid JSON`])
  t.notMatch(corrupt.err, pasted.slice(3, 11), 'no part of the key')

  // A server's first start without the variables generates both into the data dir; the CLI uses them.
  rmSync(file)
  const generated = resolveSecrets(testConfig(env))
  const res = await cli(env, 'tenant', 'create', 'acme', '--json')
  t.equal(res.code, 0, res.err)
  const services = await serverOn(t, { ...env, SVC_MASTER_KEY: generated.masterKey, SVC_KEY_HASH_SECRET: generated.keyHashSecret })
  const created = JSON.parse(res.out)
  t.equal((await services.authenticator.authenticate(created.key)).tenantId, created.tenant.id, 'the printed key authenticates')
  await services.close()
  const rewrap = await cli(env, 'master-key', 'rewrap')
  t.equal(rewrap.code, 0, rewrap.err)
})
