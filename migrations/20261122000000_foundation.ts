import type { Knex } from 'knex'

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('tenants', (t) => {
    t.uuid('id').primary()
    t.string('name', 200).notNullable().unique()
    t.jsonb('settings').notNullable().defaultTo('{}')
    t.timestamp('created_at', { useTz: true }).notNullable()
    t.timestamp('modified_at', { useTz: true }).notNullable()
  })
  await knex.schema.createTable('applications', (t) => {
    t.uuid('id').primary()
    t.uuid('tenant_id').notNullable().references('tenants.id').onDelete('CASCADE')
    t.string('name', 200).notNullable()
    t.string('type', 20).notNullable()
    // HMAC-SHA-256 of the key; the key itself is never stored.
    t.string('key_hash', 64).notNullable().unique()
    t.jsonb('permissions').notNullable().defaultTo('[]')
    t.jsonb('rules').notNullable().defaultTo('[]')
    t.uuid('created_by')
    t.timestamp('created_at', { useTz: true }).notNullable()
    t.uuid('modified_by')
    t.timestamp('modified_at', { useTz: true }).notNullable()
    t.timestamp('expires_at', { useTz: true })
    t.index(['tenant_id', 'created_at', 'id'])
    t.index(['tenant_id', 'type'])
  })
  await knex.raw('create index applications_expires_at on applications (expires_at) where expires_at is not null')
  await knex.schema.createTable('meta', (t) => {
    t.string('key', 100).primary()
    t.text('value').notNullable()
  })
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('meta')
  await knex.schema.dropTable('applications')
  await knex.schema.dropTable('tenants')
}
