import type { Knex } from 'knex'

const TABLES = ['reactors', 'proxies'] as const

/**
 * `bound_by` becomes the saver of every Reactor and proxy, with an Application or not: callers'
 * data detokenized for the code or the destination (a react's `args`, a `require_auth` proxy's
 * expressions) goes only as far as the saver's current grants reach, since the saver chose where
 * it goes. Rows without a recorded saver take their `modified_by`, the key that wrote the code or
 * the destination as it stands, where that Application still exists and has not expired (as in
 * 20261129000200_code_binders, code whose saver is gone keeps acting unbounded rather than stop
 * unannounced). Rows with an Application saved through a server that did not record binders
 * (during that migration's rollout) are filled the same way.
 */
export async function up(knex: Knex): Promise<void> {
  const savers = knex('applications').select('id').where((q) => q.whereNull('expires_at').orWhere('expires_at', '>', knex.fn.now()))
  for (const table of TABLES) {
    await knex(table).whereNull('bound_by').whereIn('modified_by', savers).update({ bound_by: knex.ref('modified_by') })
  }
}

/** The previous version reads `bound_by` only on rows with an Application; those keep theirs (bounded, the safe side). */
export async function down(knex: Knex): Promise<void> {
  for (const table of TABLES) await knex(table).whereNull('application_id').update({ bound_by: null })
}
