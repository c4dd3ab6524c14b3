import { existsSync } from 'node:fs'
import path from 'node:path'
import t, { type Test } from 'tap'
import { migrationSource } from '../../migrations/index.js'
import { withStore } from '../../src/cli/context.js'
import { testConfig } from '../../src/config/index.js'
import { savedCodeRepository } from '../../src/store/repositories/saved-code.js'
import { startTestApp, type TestApp } from '../helpers/app.js'
import { schemaUrl } from '../helpers/audit.js'
import { cli, processStorage } from '../helpers/cli.js'
import { application } from '../helpers/tokens.js'

/**
 * `tessera migrate` names the Reactors and proxies whose saver lets no caller's token through
 * (README "On upgrade"): saved by a deploy key without token:use, or by one deleted since.
 */

const OPERATOR = 'operator-key-0123456789abcdef0123456789'
const EDIT = ['reactor:create', 'reactor:read', 'proxy:create', 'proxy:read']
const ceiling = [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:use', 'token:read'] }]
const code = 'module.exports = async (req) => req.args'

/** The environment an operator runs the CLI with: the servers' database (the app stopped, so PGlite's data dir is free). */
function cliEnv(app: TestApp): Record<string, string> {
  const env: Record<string, string> = { SVC_KEY_HASH_SECRET: app.config.keyHashSecret!, SVC_LOG_LEVEL: 'silent' }
  if (app.config.databaseUrl) env.DATABASE_URL = schemaUrl(app)
  else env.SVC_DATA_DIR = app.dataDir!
  return env
}

/** Saves a Reactor and a proxy with `key`; answers their ids. */
async function saveBoth(app: TestApp, key: string, name: string): Promise<{ reactor: string; proxy: string }> {
  const reactor = await app.request('POST', '/reactors', { key, body: { name: `${name} reactor`, code } })
  const proxy = await app.request('POST', '/proxies', { key, body: { name: `${name} proxy`, destination_url: 'https://example.com' } })
  if (reactor.status !== 201 || proxy.status !== 201) throw new Error(`saving failed: ${reactor.text} ${proxy.text}`)
  return { reactor: reactor.body.id as string, proxy: proxy.body.id as string }
}

/** Two tenants' Reactors and proxies: some saved by deploy keys without token:use or deleted since, the rest by keys holding it. */
async function deployment(t: Test) {
  const app = await startTestApp(t, { SVC_OPERATOR_KEY: OPERATOR }, { persistent: true })
  const tenant = async (key: string) => (await app.request('GET', '/tenants/self', { key })).body.id as string
  const other = await app.request('POST', '/tenants', { key: OPERATOR, body: { name: 'acme' } })
  const otherAdmin = other.body.application.key as string

  const deploy = await application(app, { type: 'management', permissions: EDIT })
  const wide = await application(app, { type: 'management', permissions: EDIT, rules: ceiling })
  const gone = await application(app, { type: 'management', permissions: EDIT, rules: ceiling })
  const otherDeploy = await application(app, { type: 'management', permissions: EDIT }, otherAdmin)
  const saved = {
    deploy: await saveBoth(app, deploy.key, 'deploy'),
    wide: await saveBoth(app, wide.key, 'wide'),
    admin: await saveBoth(app, app.adminKey, 'admin'),
    gone: await saveBoth(app, gone.key, 'gone'),
    other: await saveBoth(app, otherDeploy.key, 'other'),
  }
  t.equal((await app.request('DELETE', `/applications/${gone.id}`)).status, 204)
  const tenants = { mine: await tenant(app.adminKey), other: await tenant(otherAdmin) }
  await app.close()
  return { env: cliEnv(app), saved, savers: { deploy: deploy.id, gone: gone.id, other: otherDeploy.id }, tenants }
}

const line = (kind: string, id: string, name: string, tenant: string, saver: string, why: string) =>
  `refuses callers' tokens  ${kind} ${id} "${name}"  tenant ${tenant}  saver ${saver} (${why})`

/** The lines a report prints, in order (by kind, then id). */
function expected(world: Awaited<ReturnType<typeof deployment>>, withGone: boolean): string[] {
  const { saved, savers, tenants } = world
  const rows = [
    { who: 'deploy', tenant: tenants.mine, saver: savers.deploy, why: 'lacks token:use' },
    { who: 'other', tenant: tenants.other, saver: savers.other, why: 'lacks token:use' },
    ...(withGone ? [{ who: 'gone', tenant: tenants.mine, saver: savers.gone, why: 'gone' }] : []),
  ]
  return (['reactor', 'proxy'] as const).flatMap((kind) =>
    rows
      .map((row) => ({ ...row, id: saved[row.who as keyof typeof saved][kind] }))
      .sort((a, b) => (a.id < b.id ? -1 : 1))
      .map((row) => line(kind, row.id, `${row.who} ${kind}`, row.tenant, row.saver, row.why)),
  )
}

const refusals = (out: string) => out.split('\n').filter((l) => l.startsWith("refuses callers' tokens"))

t.test('migrate and migrate --list name the Reactors and proxies whose saver refuses callers\' tokens, across tenants', async (t) => {
  const world = await deployment(t)
  for (const args of [['migrate'], ['migrate', '--list']]) {
    const res = await cli(world.env, ...args)
    t.equal(res.code, 0, res.err)
    t.same(refusals(res.out), expected(world, true), `${args.join(' ')}: the deploy keys' and the deleted key's, not those saved by keys with token:use`)
    t.match(res.out.split('\n').at(-1), /^6 refuse callers' tokens: give each saver token:use, or save it again with a key that holds it \(README, "On upgrade"\)$/)
  }
})

t.test('before the savers migration, --list shows what the upgrade will stop, and migrate then stops exactly those', async (t) => {
  const world = await deployment(t)
  // The database as the previous version left it: rows without an Application have no saver yet.
  await withStore(testConfig(world.env), async (store) => {
    const knex = store.db.knex
    while ((await knex('knex_migrations').where({ name: '20261130000000_code_savers' }).first()) !== undefined) await knex.migrate.down({ migrationSource })
  })
  const before = await cli(world.env, 'migrate', '--list')
  t.equal(before.code, 0, before.err)
  t.match(before.out, /pending {2}20261130000000_code_savers/)
  // A saver deleted before the upgrade leaves its rows unbounded (the migration's rule): not stopped.
  const stopped = expected(world, false)
  t.same(refusals(before.out), stopped)
  const after = await cli(world.env, 'migrate')
  t.equal(after.code, 0, after.err)
  t.match(after.out, /applied {2}20261130000000_code_savers/)
  t.same(refusals(after.out), stopped, 'the same ones, now stopped')
})

t.test('the savers are read a page at a time, every row once', async (t) => {
  const world = await deployment(t)
  await cli(world.env, 'migrate')
  const ids = await withStore(testConfig(world.env), async (store) => {
    const seen: string[] = []
    for await (const page of savedCodeRepository(store.db.knex).pages({ predict: false, pageSize: 3 })) {
      t.ok(page.length <= 3)
      seen.push(...page.map((code) => code.id))
    }
    return seen
  })
  const all = Object.values(world.saved).flatMap((s) => [s.reactor, s.proxy])
  t.same([...ids].sort(), [...all].sort())
})

t.test('nothing more is printed when no saver refuses, nor where there is no database yet', async (t) => {
  const env = await processStorage(t, 'clisavers')
  const listed = await cli(env, 'migrate', '--list')
  t.equal(listed.code, 0, listed.err)
  t.same(refusals(listed.out), [])
  t.match(listed.out.split('\n').at(-1), /^pending {2}/)
  t.notOk(existsSync(path.join(env.SVC_DATA_DIR!, 'pglite')), '--list created no database')
  const migrated = await cli(env, 'migrate')
  t.equal(migrated.code, 0, migrated.err)
  t.equal(migrated.out.split('\n').at(-1), `${migrated.out.split('\n').length - 1} migration(s) applied`)
})
