import type { Knex } from 'knex'
import { getTokenType, isTokenTypeName, testsBeyondMask } from '../src/vault/types/index.js'

/**
 * Outside a transaction: in one, the lock the column change takes on `tokens` (which blocks
 * every read of it) would last until the last token is marked, while servers of the previous
 * version keep serving during a rolling upgrade. Each statement below commits on its own, and
 * the whole migration may be run again from the start after a crash part-way.
 */
export const config = { transaction: false }

/** Tokens per committed update: each holds its rows' locks only for as long as it runs. */
const BATCH = 5000

/**
 * Marks each token whose fingerprint expression or a search index tests more of its data than
 * its mask may show (a card's CVC alone): the equality tests of such a token need `reveal`.
 * The server marks every token it writes; this marks the tokens stored before, by the same rule
 * (a later change to that rule needs a migration of its own to mark again). Unmarked is the
 * default only for tokens that have neither expression, which the rule never marks.
 */
export async function up(knex: Knex): Promise<void> {
  // A constant default makes this a change of the catalog alone (Postgres 11+): the table's lock
  // lasts an instant. `if not exists`: a run that died after it left the columns behind.
  await knex.raw(`alter table tokens
    add column if not exists fingerprint_beyond_mask boolean not null default false,
    add column if not exists search_beyond_mask boolean not null default false`)
  const marked = await markedExpressions(knex)
  if (marked.fingerprints.length === 0 && marked.indexes.length === 0) return
  await markInBatches(knex, marked)
}

/** Pairs [type, expression] (fingerprints) and [type, search_indexes] (indexes) that mark a token. */
interface Marked {
  fingerprints: [string, string][]
  indexes: [string, unknown][]
}

/** The rule runs once per distinct expression (a handful of templates), not once per token. */
async function markedExpressions(knex: Knex): Promise<Marked> {
  const beyond = beyondMask()
  const prints = (await knex('tokens').distinct('type', 'fingerprint_expression').whereNotNull('fingerprint_expression')) as { type: string; fingerprint_expression: string }[]
  const indexes = (await knex('tokens').distinct('type', 'search_indexes').whereRaw("search_indexes <> '[]'::jsonb")) as { type: string; search_indexes: unknown }[]
  return {
    fingerprints: prints.filter((p) => beyond(p.type, p.fingerprint_expression)).map((p) => [p.type, p.fingerprint_expression]),
    // Not an array of templates is not what the server writes: marked, on the safe side.
    indexes: indexes
      .filter((i) => !Array.isArray(i.search_indexes) || i.search_indexes.some((template) => typeof template !== 'string' || beyond(i.type, template)))
      .map((i) => [i.type, i.search_indexes]),
  }
}

/** A stored expression that no longer parses, or a type no longer known, is marked: on the safe side. */
function beyondMask(): (type: string, template: string) => boolean {
  const seen = new Map<string, boolean>()
  const rule = (type: string, template: string) => {
    if (!isTokenTypeName(type)) return true
    try {
      return testsBeyondMask(getTokenType(type), template)
    } catch {
      return true
    }
  }
  return (type, template) => {
    const key = JSON.stringify([type, template])
    if (!seen.has(key)) seen.set(key, rule(type, template))
    return seen.get(key)!
  }
}

interface Key {
  tenant_id: string
  id: string
}

/**
 * Walks the primary key in ranges of BATCH tokens, once over the table (repeating "the first
 * BATCH unmarked ones" would scan the marked ones again each time). Setting only what is unset
 * keeps a rerun from rewriting rows already marked.
 */
async function markInBatches(knex: Knex, marked: Marked): Promise<void> {
  const marks = [
    { column: 'fingerprint_beyond_mask', of: '(type, fingerprint_expression) in (select m->>0, m->>1 from jsonb_array_elements(?::jsonb) m)', pairs: marked.fingerprints },
    { column: 'search_beyond_mask', of: '(type, search_indexes) in (select m->>0, m->1 from jsonb_array_elements(?::jsonb) m)', pairs: marked.indexes },
  ].filter((mark) => mark.pairs.length > 0)
  let from: Key | undefined
  for (;;) {
    const to = await rangeEnd(knex, from)
    for (const { column, of, pairs } of marks) {
      const q = knex('tokens').update({ [column]: true }).where({ [column]: false }).whereRaw(of, [JSON.stringify(pairs)])
      if (from) void q.whereRaw('(tenant_id, id) > (?, ?)', [from.tenant_id, from.id])
      if (to) void q.whereRaw('(tenant_id, id) <= (?, ?)', [to.tenant_id, to.id])
      await q
    }
    if (!to) return
    from = to
  }
}

/** The key of the BATCH-th token after `from`; undefined where fewer are left (the last range is open). */
async function rangeEnd(knex: Knex, from: Key | undefined): Promise<Key | undefined> {
  const q = knex('tokens').select('tenant_id', 'id').orderBy([{ column: 'tenant_id' }, { column: 'id' }]).offset(BATCH - 1).limit(1)
  if (from) void q.whereRaw('(tenant_id, id) > (?, ?)', [from.tenant_id, from.id])
  return ((await q) as Key[])[0]
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('tokens', (t) => {
    t.dropColumn('fingerprint_beyond_mask')
    t.dropColumn('search_beyond_mask')
  })
}
