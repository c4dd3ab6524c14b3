import type { Knex } from 'knex'

/**
 * Deleting an extra key ends the authorized sessions created or authorized with it
 * (sessions.deleteOfKey: `authorized_at is not null and (created_by_key_hash = ? or
 * authorized_by_key_hash = ?)`). Without these indexes that was a scan of every tenant's
 * sessions, pending ones included. Partial, with that very predicate: a public key makes pending
 * sessions by the thousand, and none of them is ever looked for by key.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('create index sessions_created_by_key_hash on sessions (created_by_key_hash) where authorized_at is not null')
  await knex.raw('create index sessions_authorized_by_key_hash on sessions (authorized_by_key_hash) where authorized_at is not null')
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop index sessions_authorized_by_key_hash')
  await knex.raw('drop index sessions_created_by_key_hash')
}
