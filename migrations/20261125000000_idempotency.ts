import type { Knex } from 'knex'

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('idempotency_keys', (t) => {
    t.uuid('tenant_id').notNullable().references('tenants.id').onDelete('CASCADE')
    t.string('key', 255).notNullable()
    // SHA-256 of caller, method, path, query and body: the same key with another request is refused.
    t.string('fingerprint', 64).notNullable()
    // Who holds the claim while the first request runs; only it may complete or release it.
    t.uuid('owner').notNullable()
    // Null while the first request is in flight.
    t.integer('status')
    // The answer as replayed: credentials and token data removed (see http/idempotency-replay.ts).
    t.text('body')
    t.boolean('withheld').notNullable().defaultTo(false)
    t.timestamp('lease_until', { useTz: true }).notNullable()
    t.timestamp('expires_at', { useTz: true }).notNullable()
    t.primary(['tenant_id', 'key'])
    t.index(['expires_at'])
  })
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('idempotency_keys')
}
