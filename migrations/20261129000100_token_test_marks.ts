import type { Knex } from 'knex'
import { getTokenType, isTokenTypeName, testsBeyondMask } from '../src/vault/types/index.js'

const BATCH = 1000

/**
 * Marks each token whose fingerprint expression or a search index tests more of its data than
 * its mask may show (a card's CVC alone): the equality tests of such a token need `reveal`.
 * The server marks every token it writes; this marks the tokens stored before, by the same rule
 * (a later change to that rule needs a migration of its own to mark again). Unmarked is the
 * default only for tokens that have neither expression, which the rule never marks.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('tokens', (t) => {
    t.boolean('fingerprint_beyond_mask').notNullable().defaultTo(false)
    t.boolean('search_beyond_mask').notNullable().defaultTo(false)
  })
  let after: { tenant_id: string; id: string } | undefined
  for (;;) {
    const q = knex('tokens')
      .select('tenant_id', 'id', 'type', 'fingerprint_expression', 'search_indexes')
      .where((w) => w.whereNotNull('fingerprint_expression').orWhereRaw("search_indexes <> '[]'::jsonb"))
      .orderBy([{ column: 'tenant_id' }, { column: 'id' }])
      .limit(BATCH)
    if (after) void q.whereRaw('(tenant_id, id) > (?, ?)', [after.tenant_id, after.id])
    const rows = (await q) as Row[]
    if (rows.length === 0) return
    for (const row of rows) {
      const marks = marksOf(row)
      if (marks.fingerprint_beyond_mask || marks.search_beyond_mask) await knex('tokens').where({ tenant_id: row.tenant_id, id: row.id }).update(marks)
    }
    const last = rows[rows.length - 1]!
    after = { tenant_id: last.tenant_id, id: last.id }
  }
}

interface Row {
  tenant_id: string
  id: string
  type: string
  fingerprint_expression: string | null
  search_indexes: string[]
}

/** A stored expression that no longer parses, or a type no longer known, is marked: on the safe side. */
function marksOf(row: Row): { fingerprint_beyond_mask: boolean; search_beyond_mask: boolean } {
  const beyond = (template: string) => {
    if (!isTokenTypeName(row.type)) return true
    try {
      return testsBeyondMask(getTokenType(row.type), template)
    } catch {
      return true
    }
  }
  return {
    fingerprint_beyond_mask: row.fingerprint_expression !== null && beyond(row.fingerprint_expression),
    search_beyond_mask: row.search_indexes.some(beyond),
  }
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('tokens', (t) => {
    t.dropColumn('fingerprint_beyond_mask')
    t.dropColumn('search_beyond_mask')
  })
}
