import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import pg from 'pg'
import t, { type Test } from 'tap'
import { testConfig } from '../../src/config/index.js'
import { createLogger } from '../../src/logger.js'
import { presentToken } from '../../src/http/presenters/tokens.js'
import { openServices } from '../../src/services.js'
import { cli, masterKey } from '../helpers/cli.js'
import { card } from '../helpers/tokens.js'

// The operator CLI on a real database (PGlite, or Postgres with DATABASE_URL).

/**
 * A database of its own for the CLI: a temporary PGlite directory, or with DATABASE_URL a fresh
 * Postgres schema chosen through the connection string (as an operator could).
 */
async function storage(t: Test): Promise<Record<string, string>> {
  const base = { SVC_KEY_HASH_SECRET: randomBytes(32).toString('hex'), SVC_LOG_LEVEL: 'silent' }
  if (!process.env.DATABASE_URL) {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'tessera-cli-'))
    t.teardown(() => rmSync(dir, { recursive: true, force: true }))
    return { ...base, SVC_DATA_DIR: dir }
  }
  const schema = `cli_${randomBytes(6).toString('hex')}`
  const admin = new pg.Client({ connectionString: process.env.DATABASE_URL })
  await admin.connect()
  await admin.query(`create schema "${schema}"`)
  t.teardown(async () => {
    await admin.query(`drop schema "${schema}" cascade`)
    await admin.end()
  })
  const url = new URL(process.env.DATABASE_URL)
  url.searchParams.set('options', `-c search_path=${schema}`)
  return { ...base, DATABASE_URL: url.toString() }
}

/** The services a server on the same storage would open. */
async function serverOn(t: Test, env: Record<string, string>) {
  const config = testConfig(env)
  const services = await openServices(config, createLogger(config), { masterKey: config.masterKey!, keyHashSecret: config.keyHashSecret! }, { presentToken })
  t.teardown(() => services.close())
  return services
}

t.test('migrate: lists, applies, then reports up to date', async (t) => {
  const env = await storage(t)
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
  const env = { ...(await storage(t)), SVC_MASTER_KEY: masterKey('k1') }
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

t.test('master-key rewrap: progress, every data key moved, safe to repeat', async (t) => {
  const env = await storage(t)
  const k1 = masterKey('k1')
  const first = await serverOn(t, { ...env, SVC_MASTER_KEY: k1 })
  const admin = await first.tenants.createTenant('vault')
  const principal = await first.authenticator.authenticate(admin.key)
  const writer = { ...principal, type: 'private' as const, permissions: ['token:create', 'token:read'], rules: [] }
  for (let i = 0; i < 7; i++) await first.tokens.createToken(writer, { type: 'card', data: card() })
  await first.close()

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
  t.equal((await cli({ ...env, SVC_MASTER_KEY: 'not-a-keyring' }, 'master-key', 'rewrap')).code, 2)
  t.equal((await cli(rotated, 'master-key', 'rewrap', '--batch-size', '0')).code, 2)
})
