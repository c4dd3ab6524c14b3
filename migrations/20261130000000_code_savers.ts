import type { Knex } from 'knex'

const TABLES = ['reactors', 'proxies'] as const

/**
 * `bound_by` becomes the saver of every Reactor and proxy, with an Application or not: callers'
 * data detokenized for the code or the destination (a react's `args`, a `require_auth` proxy's
 * expressions) goes only as far as the saver's current grants reach, since the saver chose where
 * it goes. Rows with no Application saved before take their `modified_by`, the key that wrote
 * the code or the destination as it stands, where that Application still exists; others stay
 * null (not bounded), as in 20261129000200_code_binders.
 */
export async function up(knex: Knex): Promise<void> {
  for (const table of TABLES) {
    await knex(table).whereNull('application_id').whereNull('bound_by').whereIn('modified_by', knex('applications').select('id')).update({ bound_by: knex.ref('modified_by') })
  }
}

export async function down(knex: Knex): Promise<void> {
  for (const table of TABLES) await knex(table).whereNull('application_id').update({ bound_by: null })
}
