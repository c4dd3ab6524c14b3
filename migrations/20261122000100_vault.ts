import type { Knex } from 'knex'

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('tokens', (t) => {
    t.uuid('tenant_id').notNullable().references('tenants.id').onDelete('CASCADE')
    t.string('id', 400).notNullable()
    t.string('type', 40).notNullable()
    t.jsonb('containers').notNullable()
    t.jsonb('metadata').notNullable().defaultTo('{}')
    t.jsonb('mask')
    t.string('fingerprint', 64)
    t.text('fingerprint_expression')
    t.jsonb('search_indexes').notNullable().defaultTo('[]')
    // Keyed hashes of the search-index values: searchable without storing plaintext.
    t.jsonb('search_hashes').notNullable().defaultTo('[]')
    // Envelope encryption: data under a per-token key, wrapped by master key `key_id`.
    t.string('key_id', 64).notNullable()
    t.binary('encrypted_key').notNullable()
    t.binary('ciphertext').notNullable()
    t.timestamp('expires_at', { useTz: true })
    t.uuid('created_by')
    t.timestamp('created_at', { useTz: true }).notNullable()
    t.uuid('modified_by')
    t.timestamp('modified_at', { useTz: true }).notNullable()
    t.primary(['tenant_id', 'id'])
    t.index(['tenant_id', 'created_at', 'id'])
    t.index(['tenant_id', 'type', 'fingerprint'])
    t.index(['key_id'])
  })
  await knex.raw('create index tokens_expires_at on tokens (expires_at) where expires_at is not null')
  await knex.raw('create index tokens_search_hashes on tokens using gin (search_hashes jsonb_path_ops)')
  await knex.raw('create index tokens_metadata on tokens using gin (metadata jsonb_path_ops)')

  await knex.schema.createTable('sessions', (t) => {
    t.uuid('id').primary()
    t.uuid('tenant_id').notNullable().references('tenants.id').onDelete('CASCADE')
    t.string('key_hash', 64).notNullable().unique()
    t.string('nonce_hash', 64).notNullable().unique()
    t.uuid('created_by').notNullable()
    t.jsonb('permissions').notNullable().defaultTo('[]')
    t.jsonb('rules').notNullable().defaultTo('[]')
    t.uuid('authorized_by')
    t.timestamp('authorized_at', { useTz: true })
    t.timestamp('created_at', { useTz: true }).notNullable()
    t.timestamp('expires_at', { useTz: true }).notNullable()
    t.index(['expires_at'])
  })
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('sessions')
  await knex.schema.dropTable('tokens')
}
