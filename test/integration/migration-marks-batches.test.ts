import { mkdirSync } from 'node:fs'
import path from 'node:path'
import knexFactory, { type Knex } from 'knex'
import ClientPgLite from 'knex-pglite'
import t, { type Test } from 'tap'
import { migrationSource } from '../../migrations/index.js'
import { cli, processStorage } from '../helpers/cli.js'

// The marks migration (20261129000100) on a database holding tokens: it marks them as the rule
// always did, in committed batches that leave the tokens table readable meanwhile, and it can be
// run again after a process died in the middle of it.

const MARKS = '20261129000100_token_test_marks'
const TENANTS = ['00000000-0000-4000-8000-00000000000a', '00000000-0000-4000-8000-00000000000b']

/** Stored expressions, and the marks the rule gives them. */
const PATTERNS = [
  { type: 'card', fingerprint: '{{ data.cvc }}', indexes: [], marks: [true, false] },
  { type: 'card', fingerprint: '{{ data.number | last4 }}', indexes: ['{{ data.number }}'], marks: [false, false] },
  { type: 'card', fingerprint: null, indexes: ['{{ data.number | last4 }}', '{{ data.cvc }}'], marks: [false, true] },
  { type: 'token', fingerprint: '{{ data | nope }}', indexes: [], marks: [true, false] }, // no longer parses
  { type: 'gone', fingerprint: '{{ data }}', indexes: ['{{ data }}'], marks: [true, true] }, // a type no longer known
  { type: 'card', fingerprint: null, indexes: [], marks: [false, false] },
]

/** Straight to the database of `env` (PGlite's files, or the schema in DATABASE_URL), for the rows the server would not write. */
function open(env: Record<string, string>): Knex {
  if (env.DATABASE_URL) return knexFactory({ client: 'pg', connection: env.DATABASE_URL, pool: { min: 0, max: 2 } })
  const filename = path.join(env.SVC_DATA_DIR!, 'pglite')
  mkdirSync(filename, { recursive: true, mode: 0o700 })
  return knexFactory({ client: ClientPgLite, dialect: 'postgres', connection: { filename } })
}

/** PGlite's files take one process's connection at a time: closed before the CLI opens them. */
async function withDatabase<T>(env: Record<string, string>, fn: (knex: Knex) => Promise<T>): Promise<T> {
  const knex = open(env)
  try {
    return await fn(knex)
  } finally {
    await knex.destroy()
  }
}

async function migrateToMarks(knex: Knex): Promise<void> {
  for (;;) {
    const [, pending] = (await knex.migrate.list({ migrationSource })) as [unknown[], string[]]
    if (pending[0] === MARKS) return
    await knex.migrate.up({ migrationSource })
  }
}

/**
 * `perPattern` tokens of each pattern in both tenants; the second tenant's tokens have the same
 * ids with the next pattern's expressions, so a mark that crossed tenants would show.
 */
async function storeTokens(knex: Knex, perPattern: number, patterns = PATTERNS): Promise<void> {
  const now = new Date()
  await knex('tenants').insert(TENANTS.map((id) => ({ id, name: id, created_at: now, modified_at: now })))
  for (const [shift, tenant] of TENANTS.entries()) {
    for (const [i] of patterns.entries()) {
      const p = patterns[(i + shift) % patterns.length]!
      await knex.raw(
        `insert into tokens (tenant_id, id, type, containers, fingerprint_expression, search_indexes, key_id, encrypted_key, ciphertext, created_at, modified_at)
         select ?, 'p' || ? || '-' || g, ?, '["/"]', ?, ?::jsonb, 'k', '\\x00', '\\x00', now(), now() from generate_series(1, ?) g`,
        [tenant, i, p.type, p.fingerprint, JSON.stringify(p.indexes), perPattern],
      )
    }
  }
}

/** Each pattern's tokens all carry its marks, in both tenants. */
async function checkMarks(t: Test, knex: Knex, perPattern: number, patterns = PATTERNS): Promise<void> {
  const groups = (await knex('tokens')
    .select('type', 'fingerprint_expression', 'search_indexes')
    .select(knex.raw('count(*)::int as n, bool_and(fingerprint_beyond_mask) as fp_all, bool_or(fingerprint_beyond_mask) as fp_any, bool_and(search_beyond_mask) as si_all, bool_or(search_beyond_mask) as si_any'))
    .groupBy('type', 'fingerprint_expression', 'search_indexes')) as { type: string; fingerprint_expression: string | null; search_indexes: string[]; n: number; fp_all: boolean; fp_any: boolean; si_all: boolean; si_any: boolean }[]
  for (const p of patterns) {
    const group = groups.find((g) => g.type === p.type && g.fingerprint_expression === p.fingerprint && JSON.stringify(g.search_indexes) === JSON.stringify(p.indexes))
    const name = `${p.type} ${p.fingerprint} ${JSON.stringify(p.indexes)}`
    t.same(group && [group.n, group.fp_all, group.fp_any, group.si_all, group.si_any], [perPattern * TENANTS.length, p.marks[0], p.marks[0], p.marks[1], p.marks[1]], name)
  }
}

const recorded = async (knex: Knex) => (await knex('knex_migrations').where({ name: MARKS }).first()) !== undefined

t.test('the migration marks each stored expression and index as the rule does, in ranges across both tenants', async (t) => {
  const env = await processStorage(t, 'marks')
  const perPattern = 1000 // 12,000 tokens: ranges of 5,000, 5,000 and 2,000
  await withDatabase(env, async (knex) => {
    await migrateToMarks(knex)
    await storeTokens(knex, perPattern)
  })
  const migrated = await cli(env, 'migrate')
  t.equal(migrated.code, 0, migrated.err)
  await withDatabase(env, async (knex) => {
    await checkMarks(t, knex, perPattern)
    t.ok(await recorded(knex), 'recorded as applied')
  })
})

t.test('after a process died part-way (columns added, some marked, knex lock row left set) the next migrate completes', async (t) => {
  const env = await processStorage(t, 'marks')
  const perPattern = 1000
  await withDatabase(env, async (knex) => {
    await migrateToMarks(knex)
    await storeTokens(knex, perPattern)
    await knex.raw('alter table tokens add column fingerprint_beyond_mask boolean not null default false, add column search_beyond_mask boolean not null default false')
    await knex.raw("update tokens set fingerprint_beyond_mask = true where fingerprint_expression = '{{ data.cvc }}' and id < 'p0-5'")
    await knex('knex_migrations_lock').update({ is_locked: 1 })
  })
  const migrated = await cli(env, 'migrate')
  t.equal(migrated.code, 0, migrated.err)
  await withDatabase(env, async (knex) => {
    await checkMarks(t, knex, perPattern)
    t.ok(await recorded(knex), 'recorded as applied')
    t.same(await knex('knex_migrations_lock').pluck('is_locked'), [0], "knex's lock is free again")
  })
})

interface Reads {
  before: number
  during: number
  blocked: number
  slowestMs: number
}

/**
 * Reads a token and counts the marked ones until `done`, each read allowed to wait 1 s for a
 * lock: a count strictly between none and all was read between two committed batches.
 */
async function readWhile(knex: Knex, done: () => boolean, total: number): Promise<Reads> {
  const reads: Reads = { before: 0, during: 0, blocked: 0, slowestMs: 0 }
  while (!done()) {
    const started = Date.now()
    try {
      const marked = await knex.transaction(async (trx) => {
        await trx.raw("set local lock_timeout = '1s'")
        await trx('tokens').where({ tenant_id: TENANTS[0], id: 'p0-1' }).first()
        return ((await trx('tokens').where({ fingerprint_beyond_mask: true }).count({ n: '*' }).first()) as { n: string }).n
      })
      if (Number(marked) > 0 && Number(marked) < total) reads.during++
    } catch (err) {
      const code = (err as { code?: string }).code
      if (code === '42703') reads.before++ // the columns are not there yet
      else if (code === '55P03') reads.blocked++
      else throw err
    }
    reads.slowestMs = Math.max(reads.slowestMs, Date.now() - started)
  }
  return reads
}

t.test('tokens stay readable while the migration marks them', { skip: process.env.DATABASE_URL ? false : 'needs DATABASE_URL (PGlite runs one query at a time)' }, async (t) => {
  const env = await processStorage(t, 'marks')
  const perPattern = 30000 // 60,000 tokens to mark, 12 ranges
  const patterns = [PATTERNS[0]!]
  const knex = open(env)
  t.teardown(() => knex.destroy())
  await migrateToMarks(knex)
  await storeTokens(knex, perPattern, patterns)
  let finished = false
  const started = Date.now()
  const migration = cli(env, 'migrate').finally(() => (finished = true))
  const reads = await readWhile(knex, () => finished, perPattern * TENANTS.length)
  const migrated = await migration
  t.equal(migrated.code, 0, migrated.err)
  t.comment(`migration ${Date.now() - started} ms; reads ${JSON.stringify(reads)}`)
  t.equal(reads.blocked, 0, 'no read waited a second for the tokens table')
  t.ok(reads.during > 0, 'reads were answered between batches, while the migration ran')
  await checkMarks(t, knex, perPattern, patterns)
})
