import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import t from 'tap'
import { generateApiKey } from '../../src/auth/api-keys.js'
import { withStore } from '../../src/cli/context.js'
import { testConfig } from '../../src/config/index.js'
import { forgetGeneratedSecrets, resolveSecrets, SecretsError } from '../../src/config/secrets.js'
import { createLogger } from '../../src/logger.js'
import { presentToken } from '../../src/http/presenters/tokens.js'
import { openServices } from '../../src/services.js'
import type { Store } from '../../src/store/index.js'
import { parseKeyring } from '../../src/vault/crypto/index.js'
import { checkKeyHashSecret, keyHashCheckValue, KeyHashSecretError } from '../../src/vault/key-hash-secret-check.js'
import { rewrapAll } from '../../src/vault/rewrap.js'
import { openVaultKeys, rewrapHashSecret, type VaultKeys } from '../../src/vault/vault-keys.js'
import { startTestApp } from '../helpers/app.js'
import { cli, masterKey, processStorage } from '../helpers/cli.js'
import { appKey } from '../helpers/tokens.js'

// The key lifecycle: master-key rotation beside running servers, check values, the key-hash
// secret and secrets.json. Races are made deterministic with hooks, never with timing.

const READER = { type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read', 'token:update'] }] }
const CARD = '4242424242424242'


function server(env: Record<string, string>) {
  const config = testConfig(env)
  return openServices(config, createLogger(config), { masterKey: config.masterKey!, keyHashSecret: config.keyHashSecret! }, { presentToken })
}

/** A store whose `meta.get(key)` runs `meanwhile` once, after its read: another process acting between read and write. */
function interleaved(store: Store, key: string, meanwhile: () => Promise<unknown>): Store {
  let pending = true
  const get: Store['meta']['get'] = async (k, trx) => {
    const value = await store.meta.get(k, trx)
    if (k === key && pending) {
      pending = false
      await meanwhile()
    }
    return value
  }
  return { ...store, meta: { ...store.meta, get } }
}

const fingerprint = (keys: VaultKeys) => (keys.ready ? keys.hasher.fingerprint('t', 'card', CARD) : 'down')

t.test('rewrap beside a server still encrypting under the old key: an update between read and swap is never overwritten', async (t) => {
  const k1 = masterKey('k1')
  const k2 = masterKey('k2')
  // Servers know k2 but k1 still encrypts (restarted with k1,k2 rather than k2,k1).
  const app = await startTestApp(t, { SVC_MASTER_KEY: `${k1},${k2}` }, { persistent: true })
  const key = await appKey(app, READER)
  const ids: string[] = []
  for (let i = 0; i < 4; i++) ids.push((await app.request('POST', '/tokens', { key, body: { type: 'token', data: `v${i}` } })).body.id)
  const store = app.services.store
  let first = true
  const rotating: Store = {
    ...store,
    tokens: {
      ...store.tokens,
      async findWrappedNotUnder(keyId, limit, after) {
        const rows = await store.tokens.findWrappedNotUnder(keyId, limit, after)
        // Each row read is then updated by the server: a new data key, wrapped under k1 again.
        if (first) {
          first = false
          for (const id of ids) {
            const res = await app.request('PATCH', `/tokens/${id}`, { key, body: { metadata: { touched: 'yes' } }, headers: { 'content-type': 'application/merge-patch+json' } })
            t.equal(res.status, 200)
          }
        }
        return rows
      },
    },
  }
  const progress = await rewrapAll(rotating, parseKeyring(`${k2},${k1}`), { batchSize: 100 })
  t.ok(progress.skipped >= ids.length, 'the swaps of the changed rows were refused, and the rows re-wrapped on the next pass')
  t.equal(await store.tokens.countWrappedNotUnder('k2'), 0, 'every row ends under k2')
  await app.close()
  const after = await startTestApp(t, { SVC_MASTER_KEY: k2 }, { reuse: app })
  for (const [i, id] of ids.entries()) {
    const res = await after.request('GET', `/tokens/${id}`, { key })
    t.equal(res.status, 200, `token ${i} reads under k2 alone`)
    t.equal(res.body.data, `v${i}`)
  }
})

t.test('replaceWrapping swaps only the exact wrapping that was read', async (t) => {
  const app = await startTestApp(t)
  const key = await appKey(app, READER)
  const id = (await app.request('POST', '/tokens', { key, body: { type: 'token', data: 'x' } })).body.id as string
  const knex = app.services.store.db.knex
  const row = await knex('tokens').where({ id }).first()
  const stale = { ...row, encrypted_key: Buffer.from(row.encrypted_key).fill(7) }
  t.equal(await app.services.store.tokens.replaceWrapping(stale, { key_id: row.key_id, encrypted_key: Buffer.alloc(8) }), false, 'another wrapping under the same key id: no swap')
  t.same(Buffer.from((await knex('tokens').where({ id }).first()).encrypted_key), Buffer.from(row.encrypted_key), 'row unchanged')
  t.equal(await app.services.store.tokens.replaceWrapping(row, { key_id: row.key_id, encrypted_key: row.encrypted_key }), true, 'the wrapping read: swapped')
})

t.test('a wrong key never locks the right one out: rewrap records the new key, a wrong copy leaves the vault down', async (t) => {
  const env = await processStorage(t, 'keys')
  const k1 = masterKey('k1')
  const s1 = await server({ ...env, SVC_MASTER_KEY: k1 })
  const admin = await s1.tenants.createTenant('vault')
  const writer = { ...(await s1.authenticator.authenticate(admin.key)), type: 'private' as const, permissions: ['token:create', 'token:read'], rules: [] }
  const tok = await s1.tokens.createToken(writer, { type: 'token', data: 'secret-value' })
  await s1.close()

  // Rotation run before any server was restarted with k2: k2's check value is recorded by it.
  const k2 = masterKey('k2')
  const rewrap = await cli({ ...env, SVC_MASTER_KEY: `${k2},${k1}` }, 'master-key', 'rewrap')
  t.equal(rewrap.code, 0, rewrap.err)
  const recorded = await withStore(testConfig({ ...env, SVC_MASTER_KEY: k1 }), async (store) => JSON.parse((await store.meta.get('master_key_check_values'))!) as Record<string, string>)
  t.same(Object.keys(recorded).sort(), ['k1', 'k2'], 'the rewrap recorded the check value of the key it wraps under')

  const wrong = await server({ ...env, SVC_MASTER_KEY: `${masterKey('k2')},${k1}` })
  t.equal(wrong.keys.ready, false, 'a mistyped k2: the vault is down, the server up')
  t.match(wrong.keys.ready ? '' : wrong.keys.reason, /master key k2/)
  await wrong.close()

  const right = await server({ ...env, SVC_MASTER_KEY: `${k2},${k1}` })
  t.equal(right.keys.ready, true, 'the right k2 still opens the vault')
  t.equal(right.keys.ready ? right.tokens.decrypt(tok.record) : undefined, 'secret-value')
  await right.close()
})

t.test('a keyring that does not unwrap the keyed-hash secret: vault down, no check value recorded for it', async (t) => {
  const app = await startTestApp(t, { SVC_MASTER_KEY: masterKey('k1') })
  const { store, logger } = app.services
  // The hash secret re-wrapped under k2 (as by an older rewrap that recorded no check value for k2).
  const k2 = masterKey('k2')
  await rewrapHashSecret(store, parseKeyring(`${k2},${app.config.masterKey!}`))

  const keys = await openVaultKeys(store, `${masterKey('k2')},${app.config.masterKey!}`, logger)
  t.equal(keys.ready, false, 'no throw: the vault is reported down')
  t.match(keys.ready ? '' : keys.reason, /master key k2 does not open the database/)
  const values = JSON.parse((await store.meta.get('master_key_check_values'))!) as Record<string, string>
  t.same(Object.keys(values), ['k1'], 'nothing recorded for the wrong k2')
  t.equal((await openVaultKeys(store, `${k2},${app.config.masterKey!}`, logger)).ready, true, 'the right k2 opens it')
})

t.test('two servers starting together on a new database use one keyed-hash secret', async (t) => {
  const app = await startTestApp(t)
  const { store, logger } = app.services
  const mk = app.config.masterKey!
  await store.db.knex('meta').whereIn('key', ['hash_secret', 'master_key_check_values']).delete()
  let first: VaultKeys | undefined
  // B reads "no secret", then A starts completely, then B goes on.
  const b = await openVaultKeys(
    interleaved(store, 'hash_secret', async () => (first = await openVaultKeys(store, mk, logger))),
    mk,
    logger,
  )
  const later = await openVaultKeys(store, mk, logger)
  t.equal(fingerprint(b), fingerprint(first!), 'B runs on the secret A stored')
  t.equal(fingerprint(later), fingerprint(b), 'and so does a server started after both')
})

t.test('two servers starting together record both of their keys, and refuse a second key of one id', async (t) => {
  const app = await startTestApp(t)
  const { store, logger } = app.services
  const k1 = app.config.masterKey!
  const k2 = masterKey('k2')
  const k3 = masterKey('k3')
  let a: VaultKeys | undefined
  const b = await openVaultKeys(interleaved(store, 'master_key_check_values', async () => (a = await openVaultKeys(store, `${k2},${k1}`, logger))), `${k3},${k1}`, logger)
  t.equal(a!.ready, true)
  t.equal(b.ready, true)
  const values = JSON.parse((await store.meta.get('master_key_check_values'))!) as Record<string, string>
  t.same(Object.keys(values).sort(), ['k1', 'k2', 'k3'], 'neither overwrote the other\'s check value')

  // The same new id with different keys: the second to record is refused, not the first overwritten.
  const k4a = masterKey('k4')
  const k4b = masterKey('k4')
  let c: VaultKeys | undefined
  const d = await openVaultKeys(interleaved(store, 'master_key_check_values', async () => (c = await openVaultKeys(store, `${k4a},${k1}`, logger))), `${k4b},${k1}`, logger)
  t.equal(c!.ready, true, 'the first k4 recorded')
  t.equal(d.ready, false, 'the other k4 finds the vault down')
  t.equal((await openVaultKeys(store, `${k4a},${k1}`, logger)).ready, true, 'the recorded k4 still opens it')
})

t.test('one damaged row does not stop the rotation: it is named, the rest re-wrapped, exit 1', async (t) => {
  const env = await processStorage(t, 'keys')
  const k1 = masterKey('k1')
  const s = await server({ ...env, SVC_MASTER_KEY: k1 })
  const admin = await s.tenants.createTenant('vault')
  const writer = { ...(await s.authenticator.authenticate(admin.key)), type: 'private' as const, permissions: ['token:create', 'token:read'], rules: [] }
  for (let i = 0; i < 12; i++) await s.tokens.createToken(writer, { type: 'token', data: `v${i}` })
  // The first row in key order is damaged: it heads every batch.
  const first = await s.store.db.knex('tokens').orderBy(['tenant_id', 'id']).first()
  const damaged = Buffer.from(first.encrypted_key)
  damaged[damaged.length - 1]! ^= 1
  await s.store.db.knex('tokens').where({ tenant_id: first.tenant_id, id: first.id }).update({ encrypted_key: damaged })
  await s.close()

  const rotated = { ...env, SVC_MASTER_KEY: `${masterKey('k2')},${k1}` }
  const res = await cli(rotated, 'master-key', 'rewrap', '--batch-size', '3')
  t.equal(res.code, 1, 'exit 1: the rotation is not complete')
  t.match(res.err, `not re-wrapped: tenant ${first.tenant_id} token ${first.id}: its wrapped key does not decrypt under k1`)
  t.match(res.err, /Do not remove k1 from SVC_MASTER_KEY/)
  t.match(res.out, /done: 11 data key\(s\) now under k2/)
  t.equal(await withStore(testConfig(rotated), (store) => store.tokens.countWrappedNotUnder('k2')), 1, 'only the damaged row is left under k1')
  const again = await cli(rotated, 'master-key', 'rewrap')
  t.equal(again.code, 1)
  t.match(again.err, first.id, 'run again: named again')
})

t.test('the key-hash secret is checked against the value the first server recorded', async (t) => {
  const env = await processStorage(t, 'keys')
  const mk = masterKey('k1')
  const s1 = await server({ ...env, SVC_MASTER_KEY: mk })
  const admin = await s1.tenants.createTenant('acme')
  const recorded = await s1.store.meta.get('key_hash_secret_check')
  await s1.close()
  t.equal(recorded, keyHashCheckValue(env.SVC_KEY_HASH_SECRET!), 'recorded on first start')
  t.not(recorded, env.SVC_KEY_HASH_SECRET)
  t.notMatch(recorded, createHash('sha256').update(env.SVC_KEY_HASH_SECRET!).digest('base64url'), 'not a plain hash of the secret')

  const other = { ...env, SVC_MASTER_KEY: mk, SVC_KEY_HASH_SECRET: 'x'.repeat(40) }
  await t.rejects(server(other), KeyHashSecretError, 'a server with another secret is refused')
  await t.rejects(server(other), /SVC_KEY_HASH_SECRET is not the secret this database's API keys were hashed under/)

  const created = await cli(other, 'tenant', 'create', 'acme2', '--json')
  t.equal(created.code, 2, 'the CLI refuses it too (configuration: exit 2)')
  t.equal(created.out, '', 'no key printed')
  t.match(created.err, /SVC_KEY_HASH_SECRET is not the secret/)

  const s2 = await server({ ...env, SVC_MASTER_KEY: mk })
  t.equal(await s2.store.tenants.count(), 2, 'no tenant was created with the wrong secret (default and acme)')
  t.ok(await s2.authenticator.authenticate(admin.key), 'the right secret still works')
  await s2.close()
  const right = await cli({ ...env, SVC_MASTER_KEY: mk }, 'tenant', 'create', 'acme3', '--json')
  t.equal(right.code, 0, right.err)
})

t.test('a generated key-hash secret is refused for a database that holds tenants, and not kept', async (t) => {
  const env = await processStorage(t, 'keys')
  const k1 = masterKey('k1')
  const s1 = await server({ ...env, SVC_MASTER_KEY: k1 })
  await s1.tenants.createTenant('acme')
  // A database written before check values were recorded.
  await s1.store.db.knex('meta').where({ key: 'key_hash_secret_check' }).delete()
  await s1.close()
  // A server on another, new data dir without the variables (Postgres), or PGlite's own.
  const config = testConfig({ ...env, SVC_KEY_HASH_SECRET: '' })
  const secrets = resolveSecrets(config)
  t.same(secrets.generated.sort(), ['key_hash_secret', 'master_key'])
  await t.rejects(openServices(config, createLogger(config), secrets, { presentToken }), /was generated just now, but this database already holds tenants/)
  forgetGeneratedSecrets(config, secrets)
  t.notOk(existsSync(path.join(env.SVC_DATA_DIR!, 'secrets.json')), 'the generated secrets are taken back')

  // Given the servers' secret, a database without a check value takes it (and records it).
  const s2 = await server({ ...env, SVC_MASTER_KEY: k1 })
  t.equal(await s2.store.meta.get('key_hash_secret_check'), keyHashCheckValue(env.SVC_KEY_HASH_SECRET!))
  await s2.close()
})

t.test('two servers with different key-hash secrets starting together on a new database: the second is refused', async (t) => {
  const app = await startTestApp(t)
  const store = app.services.store
  await store.db.knex('meta').where({ key: 'key_hash_secret_check' }).delete()
  const b = checkKeyHashSecret(
    interleaved(store, 'key_hash_secret_check', () => checkKeyHashSecret(store, 'a'.repeat(40), { source: 'SVC_KEY_HASH_SECRET', record: true })),
    'b'.repeat(40),
    { source: 'SVC_KEY_HASH_SECRET', record: true },
  )
  await t.rejects(b, KeyHashSecretError, 'B read nothing recorded, but A recorded first: B is refused')
  t.equal(await store.meta.get('key_hash_secret_check'), keyHashCheckValue('a'.repeat(40)))
})

t.test('secrets.json: a restored file without key_hash_secret, and values that are not secrets', { skip: process.env.DATABASE_URL ? 'the data dir alone' : false }, async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tessera-keys-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const file = path.join(dir, 'secrets.json')
  const config = testConfig({ SVC_DATA_DIR: dir })
  const key32 = `k1:${Buffer.alloc(32, 1).toString('base64')}`
  const cases: [string, string, RegExp][] = [
    ['master_key only', JSON.stringify({ master_key: key32 }), /holds a master_key but no key_hash_secret/],
    ['null', 'null', /must hold a JSON object/],
    ['an array', '[]', /must hold a JSON object/],
    ['a number for master_key', JSON.stringify({ master_key: 5, key_hash_secret: 'h'.repeat(44) }), /its master_key must be a string/],
    ['null for key_hash_secret', JSON.stringify({ master_key: key32, key_hash_secret: null }), /its key_hash_secret must be a string/],
    ['an empty key_hash_secret', JSON.stringify({ master_key: key32, key_hash_secret: '' }), /key_hash_secret must be at least 32 characters/],
    ['a short key_hash_secret', JSON.stringify({ master_key: key32, key_hash_secret: 'abc' }), /key_hash_secret must be at least 32 characters/],
    ['a master key that is not base64', JSON.stringify({ master_key: 'k1:not*base64', key_hash_secret: 'h'.repeat(44) }), /master_key is not a valid master key .*not valid base64/],
    ['a 16-byte master key', JSON.stringify({ master_key: `k1:${Buffer.alloc(16, 9).toString('base64')}`, key_hash_secret: 'h'.repeat(44) }), /16 bytes/],
  ]
  for (const [name, text, message] of cases) {
    writeFileSync(file, text, { mode: 0o600 })
    let error: unknown
    try {
      resolveSecrets(config)
    } catch (err) {
      error = err
    }
    t.type(error, SecretsError, name)
    t.match((error as Error).message, message, name)
    t.match((error as Error).message, file, `${name}: names the file`)
    t.notMatch((error as Error).message, /AQEBAQEB|CQkJCQkJ|hhhhhhhh|not\*base64/, `${name}: quotes no value`)
    t.equal(readFileSync(file, 'utf8'), text, `${name}: the file is left as it was`)
  }
  writeFileSync(file, JSON.stringify({ master_key: key32, key_hash_secret: '' }))
  const res = await cli({ SVC_DATA_DIR: dir, SVC_LOG_LEVEL: 'silent' }, 'tenant', 'create', 'acme')
  t.equal(res.code, 2, 'the CLI: exit 2')
  t.match(res.err, /key_hash_secret must be at least 32 characters/)
})

t.test('the server exits 2 with one line for a secrets.json it cannot use, before the bootstrap', { skip: process.env.DATABASE_URL ? 'the data dir alone' : false }, async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tessera-keys-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(path.join(dir, 'secrets.json'), JSON.stringify({ master_key: 5 }), { mode: 0o600 })
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], { env: { PATH: process.env.PATH, SVC_DATA_DIR: dir, PORT: '0', SVC_BOOTSTRAP_API_KEY: generateApiKey() }, stdio: ['ignore', 'pipe', 'pipe'] })
  t.teardown(() => child.kill('SIGKILL'))
  let out = ''
  let err = ''
  child.stdout.on('data', (d: Buffer) => (out += d.toString()))
  child.stderr.on('data', (d: Buffer) => (err += d.toString()))
  const code = await new Promise<number | null>((r) => child.on('exit', r))
  t.equal(code, 2)
  t.equal(err, `tessera failed to start: cannot read ${path.join(dir, 'secrets.json')}: its master_key must be a string\n`)
  t.notMatch(out + err, /tsr_mgmt_|management API key/, 'no key printed')
  t.notOk(existsSync(path.join(dir, 'pglite')), 'no database opened')
})

t.test('a server given another SVC_KEY_HASH_SECRET exits 2 with one line, before the bootstrap or a listen', { skip: process.env.DATABASE_URL ? 'the data dir alone' : false }, async (t) => {
  const env = await processStorage(t, 'keys')
  const mk = masterKey('k1')
  const first = await server({ ...env, SVC_MASTER_KEY: mk })
  await first.close()
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], { env: { PATH: process.env.PATH, ...env, SVC_MASTER_KEY: mk, SVC_KEY_HASH_SECRET: 'y'.repeat(40), PORT: '0' }, stdio: ['ignore', 'pipe', 'pipe'] })
  t.teardown(() => child.kill('SIGKILL'))
  let err = ''
  child.stderr.on('data', (d: Buffer) => (err += d.toString()))
  const code = await new Promise<number | null>((r) => child.on('exit', r))
  t.equal(code, 2)
  t.match(err, /^tessera failed to start: SVC_KEY_HASH_SECRET is not the secret this database's API keys were hashed under/)
  t.equal(err.trim().split('\n').length, 1, 'one line, no stack')
})
