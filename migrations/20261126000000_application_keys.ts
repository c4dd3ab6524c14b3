import type { Knex } from 'knex'

/**
 * Extra keys of an Application, for rotation without downtime. The Application's own key
 * (`applications.key_hash`, issued by create and regenerate) stays where it is, so existing
 * keys keep authenticating untouched; these live beside it until deleted.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('application_keys', (t) => {
    t.uuid('id').primary()
    t.uuid('tenant_id').notNullable().references('tenants.id').onDelete('CASCADE')
    t.uuid('application_id').notNullable().references('applications.id').onDelete('CASCADE')
    // HMAC-SHA-256 of the key; the key itself is never stored.
    t.string('key_hash', 64).notNullable().unique()
    t.uuid('created_by')
    t.timestamp('created_at', { useTz: true }).notNullable()
    t.index(['tenant_id', 'application_id', 'created_at'])
  })
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('application_keys')
}
