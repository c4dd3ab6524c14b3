import type { Knex } from 'knex'

/**
 * When a public Application's grants were last narrowed. A narrowing ends the sessions it had
 * vouched for that were authorized; those still pending are refused authorization from then on
 * by comparing their creation with this time (ending them all in the narrowing's transaction
 * could be thousands of rows: a public key makes them freely). Null: never narrowed since.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('applications', (table) => table.timestamp('grants_narrowed_at', { useTz: true }).nullable())
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('applications', (table) => table.dropColumn('grants_narrowed_at'))
}
