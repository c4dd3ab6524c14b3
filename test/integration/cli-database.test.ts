import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync, readdirSync } from 'node:fs'
import path from 'node:path'
import pg from 'pg'
import t from 'tap'
import { testConfig } from '../../src/config/index.js'
import { openDatabase } from '../../src/store/index.js'
import { migrationSource } from '../../migrations/index.js'
import { cli, masterKey, processStorage } from '../helpers/cli.js'

// Which database the operator commands find: none, one partly migrated, one from a newer
// Tessera, one several replicas migrate at once (PGlite, or Postgres with DATABASE_URL).

const postgres = !!process.env.DATABASE_URL
const known = await migrationSource.getMigrations([])

/** Every command but `tessera migrate`, with the exit code of its failure (verify: "could not run"). */
const commands = [
  [['tenant', 'create', 'acme'], 1],
  [['master-key', 'rewrap'], 1],
  [['audit', 'verify'], 2],
  [['audit', 'prune'], 1],
] as const

/** How the commands name the database: the data dir, or the URL's database without user or password. */
function where(env: Record<string, string>): string {
  if (!env.DATABASE_URL) return path.resolve(env.SVC_DATA_DIR!)
  const url = new URL(env.DATABASE_URL)
  return `${url.protocol}//${url.host}${url.pathname}`
}

/** Runs `fn` on the storage's database, migrated as a server would. */
async function onDatabase(env: Record<string, string>, fn: (knex: Awaited<ReturnType<typeof openDatabase>>['knex']) => Promise<unknown>): Promise<void> {
  const db = await openDatabase(testConfig(env))
  try {
    await fn(db.knex)
  } finally {
    await db.close()
  }
}

async function tables(env: Record<string, string>): Promise<number> {
  const schema = new URL(env.DATABASE_URL!).searchParams.get('options')!.split('=')[1]!
  const client = new pg.Client({ connectionString: process.env.DATABASE_URL })
  await client.connect()
  try {
    return (await client.query('select count(*)::int as n from pg_tables where schemaname = $1', [schema])).rows[0].n as number
  } finally {
    await client.end()
  }
}

t.test('with no Tessera database there, every command but migrate refuses and creates nothing; migrate --list lists all pending', async (t) => {
  const storage: Record<string, string> = { ...(await processStorage(t, 'clidb')), SVC_MASTER_KEY: masterKey('k1') }
  // A mistyped SVC_DATA_DIR (PGlite), or an empty schema (Postgres).
  const env = postgres ? storage : { ...storage, SVC_DATA_DIR: path.join(storage.SVC_DATA_DIR!, 'dtaa') }
  for (const [argv, code] of commands) {
    const res = await cli(env, ...argv)
    t.same([res.code, res.out], [code, ''], `${argv.join(' ')}: exit ${code}, no result`)
    t.match(res.err, `no Tessera database at ${where(env)}; start a server or run \`tessera migrate\` first`, argv.join(' '))
  }
  const list = await cli(env, 'migrate', '--list')
  t.equal(list.code, 0, list.err)
  t.same(list.out.split('\n'), known.map((name) => `pending  ${name}`))
  if (postgres) t.equal(await tables(env), 0, 'no table was created')
  else t.notOk(existsSync(env.SVC_DATA_DIR!), 'no data dir was created')

  t.equal((await cli(env, 'migrate')).code, 0, 'migrate itself creates the database')
  const created = await cli(env, 'tenant', 'create', 'acme')
  t.equal(created.code, 0, created.err)
})

t.test('a partly migrated database: the commands ask for `tessera migrate` first', async (t) => {
  const env = { ...(await processStorage(t, 'clidb')), SVC_MASTER_KEY: masterKey('k1') }
  const last = known[known.length - 1]!
  await onDatabase(env, (knex) => knex('knex_migrations').where({ name: last }).delete())
  for (const [argv, code] of commands) {
    const res = await cli(env, ...argv)
    t.same([res.code, res.out], [code, ''], `${argv.join(' ')}: exit ${code}, no result`)
    t.match(res.err, `the database at ${where(env)} is not up to date (pending migrations: ${last}); run \`tessera migrate\` first`, argv.join(' '))
  }
  t.match((await cli(env, 'migrate', '--list')).out, `pending  ${last}`)
})

t.test('a database a newer Tessera migrated is named as such, by the server start and by every command', async (t) => {
  const env = { ...(await processStorage(t, 'clidb')), SVC_MASTER_KEY: masterKey('k1') }
  await onDatabase(env, (knex) => knex('knex_migrations').insert({ name: '20991231000000_future', batch: 99, migration_time: new Date() }))
  const newer = 'the database was migrated by a newer Tessera (20991231000000_future); run that version or restore a backup'
  await t.rejects(openDatabase(testConfig(env)), { message: newer }, 'a server does not start')
  // Refused under the migration lock (Postgres): had the failed start kept it, this would wait forever.
  const migrate = await cli(env, 'migrate')
  t.same([migrate.code, migrate.err], [1, `tessera: ${newer}`])
  const list = await cli(env, 'migrate', '--list')
  t.equal(list.code, 0, 'the list still reads')
  t.match(list.out, 'applied  20991231000000_future  (unknown to this version: migrated by a newer Tessera)', 'and names what this version does not know')
  for (const [argv, code] of commands) {
    const res = await cli(env, ...argv)
    t.same([res.code, res.out], [code, ''], `${argv.join(' ')}: exit ${code}, no result`)
    t.match(res.err, newer, argv.join(' '))
  }
})

t.test('a query error reaches the operator as its SQLSTATE, never as SQL', async (t) => {
  const env = { ...(await processStorage(t, 'clidb')), SVC_MASTER_KEY: masterKey('k1') }
  await onDatabase(env, (knex) => knex.raw('alter table audit_checkpoints rename to audit_checkpoints_away'))
  const res = await cli(env, 'audit', 'prune')
  t.same([res.code, res.err], [1, 'tessera: the database refused a statement (SQLSTATE 42P01)'])
  const verify = await cli(env, 'audit', 'verify')
  t.same([verify.code, verify.err], [2, 'tessera: audit verify could not run: the database refused a statement (SQLSTATE 42P01)'])
})

t.test('a database that does not exist is a configuration error, not "retry later"', { skip: postgres ? false : 'needs DATABASE_URL' }, async (t) => {
  const password = `pw-${randomBytes(4).toString('hex')}`
  const url = new URL(process.env.DATABASE_URL!)
  url.password = password
  url.pathname = `/no_such_db_${randomBytes(4).toString('hex')}`
  const env = { ...(await processStorage(t, 'clidb')), DATABASE_URL: url.toString(), SVC_MASTER_KEY: masterKey('k1') }
  for (const [argv, code] of [[['migrate'], 1], [['migrate', '--list'], 1], ...commands] as const) {
    const res = await cli(env, ...argv)
    t.equal(res.code, code, `${argv.join(' ')}: exit ${code}`)
    t.match(res.err, `the database refused the connection: database "${url.pathname.slice(1)}" does not exist (SQLSTATE 3D000); check DATABASE_URL`, argv.join(' '))
    t.notMatch(res.err, /did not answer in time/, argv.join(' '))
    t.notMatch(res.err, password, 'never the password')
  }
})

t.test('replicas and `tessera migrate` starting together on a fresh database all succeed, each migration applied once', { skip: postgres ? false : 'one process owns a PGlite data dir' }, async (t) => {
  for (let round = 0; round < 8; round++) {
    const env = await processStorage(t, 'clirace')
    const starts = [0, 1, 2].map(() => openDatabase(testConfig(env)).then((db) => db.close()))
    const runs = [0, 1, 2].map(() => cli(env, 'migrate'))
    await Promise.all(starts)
    const results = await Promise.all(runs)
    t.same(results.map((r) => [r.code, r.err]), [[0, ''], [0, ''], [0, '']], `round ${round}: every migrate succeeds`)
    const applied = results.flatMap((r) => r.out.split('\n').filter((line) => line.startsWith('applied  ')))
    t.ok(applied.length <= known.length && new Set(applied).size === applied.length, `round ${round}: no migration ran twice`)
    await onDatabase(env, async (knex) => t.same(await knex('knex_migrations').orderBy('id').pluck('name'), known, `round ${round}: each applied once`))
  }
})

t.test('a reader that goes away early (`| head -1`): exit 0, no stack, the store closed', async (t) => {
  const env = await processStorage(t, 'clidb')
  t.equal((await cli(env, 'migrate')).code, 0)
  for (const argv of [['config'], ['migrate', '--list']]) {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...argv], { env: { PATH: process.env.PATH, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
    // Closed before the command writes its first line: every write meets EPIPE.
    child.stdout.destroy()
    let err = ''
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()))
    const code = await new Promise((resolve) => child.on('exit', resolve))
    t.same([code, err], [0, ''], `${argv.join(' ')}: exit 0, nothing on stderr`)
  }
  if (!postgres) t.same(readdirSync(env.SVC_DATA_DIR!).filter((f) => f.endsWith('.lock')), [], 'PGlite closed: its data dir lock released')
})
