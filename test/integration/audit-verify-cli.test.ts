import { execFile } from 'node:child_process'
import { randomBytes, randomUUID } from 'node:crypto'
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import t from 'tap'
import { runAuditVerify } from '../../src/audit/verify-cli.js'
import { testConfig } from '../../src/config/index.js'
import { startTestApp, type TestApp } from '../helpers/app.js'
import { auditEvent, auditRows, defaultTenant, schemaUrl, tamper } from '../helpers/audit.js'
import { cli as tessera } from '../helpers/cli.js'

const run = promisify(execFile)

/** The environment an operator would run the CLI with: the servers' database and secrets. */
function cliEnv(app: TestApp): Record<string, string> {
  const env: Record<string, string> = { SVC_KEY_HASH_SECRET: app.config.keyHashSecret!, SVC_LOG_LEVEL: 'silent' }
  if (app.config.databaseUrl) env.DATABASE_URL = schemaUrl(app)
  else env.SVC_DATA_DIR = app.dataDir!
  return env
}

/** `npm run audit-verify`, the alias of `tessera audit verify`. */
async function cli(app: TestApp, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const { DATABASE_URL: _ignored, ...inherited } = process.env
  try {
    const { stdout } = await run('npm', ['run', '-s', 'audit-verify', '--', ...args], { env: { ...inherited, ...cliEnv(app) }, timeout: 60_000 })
    return { code: 0, stdout, stderr: '' }
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string }
    if (typeof e.code !== 'number') throw err
    return { code: e.code, stdout: e.stdout ?? '', stderr: e.stderr ?? '' }
  }
}

// PGlite is one process: the CLI runs while the server is stopped, as the README says.
t.test('npm run audit-verify: exit 0 on an intact log, 1 naming the first broken link', async (t) => {
  const first = await startTestApp(t, {}, { persistent: true })
  const tenant = await defaultTenant(first)
  for (let i = 0; i < 5; i++) await first.services.audit.record([auditEvent(tenant)])
  await first.close()

  const lines: string[] = []
  t.equal(await runAuditVerify({}, (l) => lines.push(l), testConfig(cliEnv(first))), 0)
  // The bootstrap's tenant.create and application.create, then these five.
  t.match(lines.join('\n'), new RegExp(`ok +tenant ${tenant}: entries 1\\.\\.7 \\(7\\)`))
  t.match(lines.at(-1), /chains intact/)

  const second = await startTestApp(t, {}, { reuse: first })
  await tamper(second, (k) => k('audit_events').where({ tenant_id: tenant, seq: 3 }).update({ action: 'token.list' }))
  await second.close()

  const broken = await cli(first, [])
  t.equal(broken.code, 1)
  t.match(broken.stdout, new RegExp(`BROKEN +tenant ${tenant} at seq 3 \\(entry [0-9a-f-]{36}\\): altered`))
  const json = await cli(first, ['--json', '--tenant', tenant])
  t.equal(json.code, 1)
  t.match(JSON.parse(json.stdout), { ok: false, tenants: [{ tenantId: tenant, ok: false, break: { seq: 3, reason: 'altered' } }] })
  const bad = await cli(first, ['--tenant', 'nope'])
  t.equal(bad.code, 2)
  t.match(bad.stderr, /--tenant must be a tenant id/)
})

t.test('tessera audit verify finds each of the four ways of breaking a chain, at its first broken link', async (t) => {
  const first = await startTestApp(t, {}, { persistent: true })
  const chains = { altered: randomUUID(), deleted: randomUUID(), reordered: randomUUID(), inserted: randomUUID(), intact: randomUUID() }
  for (const tenant of Object.values(chains)) for (let i = 0; i < 6; i++) await first.services.audit.record([auditEvent(tenant)])
  await first.close()

  const second = await startTestApp(t, {}, { reuse: first })
  const [copy] = await auditRows(second, chains.inserted)
  await tamper(second, async (k) => {
    await k('audit_events').where({ tenant_id: chains.altered, seq: 4 }).update({ status: 204 })
    await k('audit_events').where({ tenant_id: chains.deleted, seq: 3 }).delete()
    // Rows 3 and 4 trade places.
    await k('audit_events').where({ tenant_id: chains.reordered, seq: 3 }).update({ seq: -3 })
    await k('audit_events').where({ tenant_id: chains.reordered, seq: 4 }).update({ seq: 3 })
    await k('audit_events').where({ tenant_id: chains.reordered, seq: -3 }).update({ seq: 4 })
    // A forged entry at 4, the rest moved up one, the head moved along.
    await k.raw('update audit_events set seq = seq + 1000 where tenant_id = ? and seq >= 4', [chains.inserted])
    await k.raw('update audit_events set seq = seq - 999 where tenant_id = ? and seq >= 1000', [chains.inserted])
    await k('audit_events').insert({ ...copy, seq: 4, id: randomUUID(), target_ids: JSON.stringify(copy!.target_ids), token_ids: '[]' })
    await k('audit_chain_heads').where({ tenant_id: chains.inserted }).update({ seq: 7 })
  })
  await second.close()

  const json = await cli(first, ['--json'])
  t.equal(json.code, 1, 'exit 1: broken')
  const report = JSON.parse(json.stdout) as { ok: boolean; tenants: { tenantId: string; ok: boolean; break?: { seq: number; reason: string } }[] }
  const of = (tenant: string) => report.tenants.find((r) => r.tenantId === tenant)
  t.match(of(chains.altered), { ok: false, break: { seq: 4, reason: 'altered' } })
  t.match(of(chains.deleted), { ok: false, break: { seq: 3, reason: 'missing' } })
  t.match(of(chains.reordered), { ok: false, break: { seq: 3, reason: 'altered' } })
  t.match(of(chains.inserted), { ok: false, break: { seq: 4, reason: 'altered' } })
  t.match(of(chains.intact), { ok: true, entries: 6 })

  const text = await cli(first, [])
  t.equal(text.code, 1)
  for (const [way, seq, reason] of [['altered', 4, 'altered'], ['deleted', 3, 'missing'], ['reordered', 3, 'altered'], ['inserted', 4, 'altered']] as const) {
    t.match(text.stdout, new RegExp(`BROKEN +tenant ${chains[way]} at seq ${seq}\\b.*: ${reason}`), `${way}: named with its first broken link`)
  }
  t.match(text.stdout, new RegExp(`ok +tenant ${chains.intact}: entries 1\\.\\.6`))
  t.match(text.stdout, /AUDIT CHAIN BROKEN/)
})

t.test('audit verify --expect: an entry known from an export catches the newest entries deleted with the head moved back', async (t) => {
  const first = await startTestApp(t, {}, { persistent: true })
  const tenant = randomUUID()
  for (let i = 0; i < 6; i++) await first.services.audit.record([auditEvent(tenant)])
  const rows = await auditRows(first, tenant)
  const [third, fourth, sixth] = [rows[2]!, rows[3]!, rows[5]!]
  await tamper(first, async (k) => {
    await k('audit_events').where({ tenant_id: tenant }).where('seq', '>', 4).delete()
    await k('audit_chain_heads').where({ tenant_id: tenant }).update({ seq: 4, hash: fourth.hash })
  })
  await first.close()

  const config = testConfig(cliEnv(first))
  const verify = (expect?: { seq: number; hash: string }) => runAuditVerify({ tenantId: tenant, json: true, expect }, (l) => lines.push(l), config)
  const lines: string[] = []
  t.equal(await verify(), 0, 'from the database alone the chain looks as if it stopped at 4')
  t.equal(await verify({ seq: 6, hash: sixth.hash }), 1)
  t.match(JSON.parse(lines.at(-1)!), { ok: false, tenants: [{ break: { seq: 5, reason: 'missing' } }] })
  t.equal(await verify({ seq: 3, hash: third.hash }), 0, 'an entry still there with its hash')
  t.equal(await verify({ seq: 3, hash: fourth.hash }), 1)
  t.match(JSON.parse(lines.at(-1)!), { tenants: [{ break: { seq: 3, reason: 'altered' } }] })

  const cliRun = await cli(first, ['--tenant', tenant, '--expect', `6:${sixth.hash}`])
  t.equal(cliRun.code, 1)
  t.match(cliRun.stdout, new RegExp(`BROKEN +tenant ${tenant} at seq 5: missing: .*entry 6 was expected`))
  for (const [args, message] of [
    [['--expect', `6:${sixth.hash}`], /--expect needs --tenant/],
    [['--tenant', tenant, '--expect', `6:${sixth.hash.toUpperCase()}`], /--expect must be <seq>:<hash>/],
    [['--tenant', tenant, '--expect', '0:' + sixth.hash], /--expect must be/],
  ] as const) {
    const bad = await cli(first, [...args])
    t.equal(bad.code, 2, args.join(' '))
    t.match(bad.stderr, message)
  }
})

/** The CLI's environment without SVC_KEY_HASH_SECRET, with a data dir (PGlite's, or an empty one beside Postgres). */
function withoutSecret(t: { teardown(fn: () => unknown): void }, app: TestApp): Record<string, string> {
  const { SVC_KEY_HASH_SECRET: _dropped, ...env } = cliEnv(app)
  if (!env.SVC_DATA_DIR) {
    env.SVC_DATA_DIR = mkdtempSync(path.join(os.tmpdir(), 'tessera-verify-'))
    t.teardown(() => rmSync(env.SVC_DATA_DIR!, { recursive: true, force: true }))
  }
  return env
}

t.test('audit verify never generates a secret; a wrong one beside secrets.json is named, not a broken chain', async (t) => {
  const first = await startTestApp(t, {}, { persistent: true })
  const tenant = await defaultTenant(first)
  for (let i = 0; i < 3; i++) await first.services.audit.record([auditEvent(tenant)])
  await first.close()
  const env = withoutSecret(t, first)
  const file = path.join(env.SVC_DATA_DIR!, 'secrets.json')

  // The servers ran with their secrets in the environment: nothing in the data dir to use.
  const missing = await tessera(env, 'audit', 'verify')
  t.same([missing.code, missing.out], [2, ''], 'could not run, no verdict')
  t.match(missing.err, `tessera: audit verify could not run: SVC_KEY_HASH_SECRET is not set and ${file} does not exist`)
  t.notOk(existsSync(file), 'no secrets.json was written')

  // Without a reference, a wrong secret and a log sealed by someone else look the same.
  const wrong = { ...env, SVC_KEY_HASH_SECRET: randomBytes(32).toString('hex') }
  const unknown = await tessera(wrong, 'audit', 'verify')
  t.equal(unknown.code, 1)
  t.match(unknown.out, /BROKEN .* unknown_key/)

  writeFileSync(file, JSON.stringify({ key_hash_secret: first.config.keyHashSecret }))
  t.equal((await tessera(env, 'audit', 'verify')).code, 0, 'the data dir\'s secret is used when the variable is unset')
  const told = await tessera(wrong, 'audit', 'verify')
  t.same([told.code, told.out], [2, ''])
  t.match(told.err, `SVC_KEY_HASH_SECRET is not the secret this audit log was sealed with (the key_hash_secret in ${file} is)`)
})

t.test('an auditor holding only SVC_AUDIT_SECRET verifies without the key-hash secret', async (t) => {
  const auditSecret = randomBytes(32).toString('hex')
  const first = await startTestApp(t, { SVC_AUDIT_SECRET: auditSecret }, { persistent: true })
  await first.services.audit.record([auditEvent(await defaultTenant(first))])
  await first.close()
  const env: Record<string, string> = { ...withoutSecret(t, first), SVC_AUDIT_SECRET: auditSecret }
  const res = await tessera(env, 'audit', 'verify')
  t.equal(res.code, 0, res.err)
  t.match(res.out, /all 1 chains intact/)
  t.notOk(existsSync(path.join(env.SVC_DATA_DIR!, 'secrets.json')), 'no secrets.json was written')
})
