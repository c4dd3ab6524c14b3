import type { Knex } from 'knex'

/**
 * An entry's and a checkpoint's time must be one the writer could have taken: a row holding
 * `infinity` or a year a JavaScript Date cannot hold (past 275760, or, read by PGlite, before
 * year 1) could not be shown by `GET /logs` or hashed by `audit verify`. `not valid`: rows
 * already stored are not checked, so an upgrade never fails on one; `audit verify` reports such
 * a row as altered.
 */
const CHECKS = [
  ['audit_events', 'occurred_at'],
  ['audit_checkpoints', 'created_at'],
] as const

export async function up(knex: Knex): Promise<void> {
  for (const [table, column] of CHECKS) {
    await knex.raw(`alter table ${table} add constraint ${table}_${column}_range check (${column} >= '0001-01-01T00:00:00Z' and ${column} < '10000-01-01T00:00:00Z') not valid`)
  }
}

export async function down(knex: Knex): Promise<void> {
  for (const [table, column] of CHECKS) await knex.raw(`alter table ${table} drop constraint ${table}_${column}_range`)
}
