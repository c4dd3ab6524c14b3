import type { Knex } from 'knex'

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('proxies', (t) => {
    t.uuid('id').primary()
    t.uuid('tenant_id').notNullable().references('tenants.id').onDelete('CASCADE')
    t.string('name', 200).notNullable()
    // Only the keyed hash of the proxy key is stored; the key itself is shown once, on create.
    t.string('key_hash', 64).notNullable().unique()
    t.text('destination_url').notNullable()
    t.text('request_transform_code')
    t.text('response_transform_code')
    // Changes whenever a transform's code does, so the runtime retires warm isolates holding the old code.
    t.uuid('version').notNullable()
    t.jsonb('configuration').notNullable().defaultTo('{}')
    // Who the transforms act as, and who detokenizes when require_auth is false.
    t.uuid('application_id').references('applications.id').onDelete('SET NULL')
    t.boolean('require_auth').notNullable().defaultTo(true)
    t.uuid('created_by')
    t.timestamp('created_at', { useTz: true }).notNullable()
    t.uuid('modified_by')
    t.timestamp('modified_at', { useTz: true }).notNullable()
    t.index(['tenant_id', 'created_at', 'id'])
  })
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('proxies')
}
