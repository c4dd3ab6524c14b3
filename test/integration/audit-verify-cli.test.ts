import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import t from 'tap'
import { runAuditVerify } from '../../src/audit/verify-cli.js'
import { testConfig } from '../../src/config/index.js'
import { startTestApp, type TestApp } from '../helpers/app.js'
import { auditEvent, defaultTenant, schemaUrl, tamper } from '../helpers/audit.js'

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
  t.match(lines.join('\n'), new RegExp(`ok +tenant ${tenant}: entries 1\\.\\.5 \\(5\\)`))
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
