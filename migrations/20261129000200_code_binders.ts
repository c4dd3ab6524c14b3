import type { Knex } from 'knex'

const TABLES = ['reactors', 'proxies'] as const

/**
 * Who bound a Reactor's or a proxy's Application (`bound_by`): the code acts as that Application
 * only within the binder's current grants. No foreign key: a binder's deletion must not turn the
 * column to null, which means "not bounded"; a deleted binder leaves the code nothing to act as.
 *
 * Rows saved before take their `modified_by`: every save (create or update) of a row with an
 * Application checked that Application against the saving key's grants, so the last saver is the
 * key that bound it as it stands. Bounding only ever narrows what the code did before. Rows with
 * no Application, no recorded saver, or a saver deleted since, stay null.
 */
export async function up(knex: Knex): Promise<void> {
  for (const table of TABLES) {
    await knex.schema.alterTable(table, (t) => {
      t.uuid('bound_by')
    })
    // Only a saver that still exists: code whose saver was deleted before the upgrade went on
    // acting as its Application; bounding it by a binder that is gone would stop it unannounced.
    await knex(table).whereNotNull('application_id').whereIn('modified_by', knex('applications').select('id')).update({ bound_by: knex.ref('modified_by') })
  }
}

export async function down(knex: Knex): Promise<void> {
  for (const table of TABLES) {
    await knex.schema.alterTable(table, (t) => {
      t.dropColumn('bound_by')
    })
  }
}
