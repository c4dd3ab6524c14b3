import knexFactory, { type Knex } from 'knex'
import ClientPgLite from 'knex-pglite'
import { migrationSource } from '../../migrations/index.js'

/**
 * An in-memory PGlite database migrated up to just before `migration`: the existing database a
 * migration test fills with old rows before running it. Closed with the test.
 */
export async function databaseBefore(t: { teardown(fn: () => unknown): void }, migration: string): Promise<Knex> {
  const knex = knexFactory({ client: ClientPgLite, dialect: 'postgres', connection: {} })
  t.teardown(() => knex.destroy())
  for (;;) {
    const [, pending] = (await knex.migrate.list({ migrationSource })) as [unknown[], string[]]
    if (pending.length === 0) throw new Error(`migration ${migration} is not pending`)
    if (pending[0] === migration) return knex
    await knex.migrate.up({ migrationSource })
  }
}
