import type { Knex } from 'knex'

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('reactors', (t) => {
    t.uuid('id').primary()
    t.uuid('tenant_id').notNullable().references('tenants.id').onDelete('CASCADE')
    t.string('name', 200).notNullable()
    t.text('code').notNullable()
    // Changes with the code, so the runtime retires warm isolates holding the old code.
    t.uuid('version').notNullable()
    t.jsonb('configuration').notNullable().defaultTo('{}')
    // The identity the Reactor acts as for tokenize/detokenize.
    t.uuid('application_id').references('applications.id').onDelete('SET NULL')
    t.uuid('created_by')
    t.timestamp('created_at', { useTz: true }).notNullable()
    t.uuid('modified_by')
    t.timestamp('modified_at', { useTz: true }).notNullable()
    t.index(['tenant_id', 'created_at', 'id'])
  })
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('reactors')
}
