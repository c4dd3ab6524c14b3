import type { Knex } from 'knex'

/**
 * The audit log (see README "Audit log"): entries, their per-tenant chain heads and signed
 * checkpoints. No foreign key to `tenants`: a tenant's audit trail outlives the tenant.
 * Entries and checkpoints are never updated: a trigger refuses UPDATE and TRUNCATE even to the
 * owner (works on PGlite too); grants keep DELETE away from the service's role where the
 * operator sets them up, and the chain makes any removal visible either way.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('audit_events', (t) => {
    t.uuid('tenant_id').notNullable()
    t.bigInteger('seq').notNullable()
    t.uuid('id').notNullable().unique()
    t.timestamp('occurred_at', { useTz: true }).notNullable()
    t.string('actor_kind', 20).notNullable()
    t.uuid('actor_id')
    t.string('action', 40).notNullable()
    t.string('target_type', 20)
    t.jsonb('target_ids').notNullable()
    t.jsonb('token_ids').notNullable()
    t.string('outcome', 10).notNullable()
    t.smallint('status').notNullable()
    t.string('transform', 10)
    t.string('permission', 100)
    t.string('trace_id', 128)
    t.string('client_ip', 45)
    t.string('request_method', 10)
    t.string('request_route', 200)
    t.string('destination_origin', 2048)
    t.string('destination_method', 10)
    t.smallint('destination_status')
    t.integer('duration_ms')
    t.uuid('parent_id')
    t.string('key_id', 16).notNullable()
    // HMAC of the previous entry's hash and this entry's content (hex).
    t.string('hash', 64).notNullable()
    t.primary(['tenant_id', 'seq'])
    t.index(['tenant_id', 'occurred_at', 'seq'])
    t.index(['tenant_id', 'actor_id', 'occurred_at'])
  })
  // One index answers "every event that touched this id", as target or as detokenized token.
  await knex.raw('create index audit_events_ids on audit_events using gin ((target_ids || token_ids) jsonb_path_ops)')

  await knex.schema.createTable('audit_chain_heads', (t) => {
    t.uuid('tenant_id').primary()
    t.bigInteger('seq').notNullable()
    t.string('hash', 64).notNullable()
    t.bigInteger('checkpoint_seq').notNullable()
    t.timestamp('checkpoint_at', { useTz: true })
  })

  await knex.schema.createTable('audit_checkpoints', (t) => {
    t.uuid('tenant_id').notNullable()
    t.bigInteger('seq').notNullable()
    t.string('hash', 64).notNullable()
    t.timestamp('created_at', { useTz: true }).notNullable()
    t.string('key_id', 16).notNullable()
    t.string('signature', 64).notNullable()
    t.primary(['tenant_id', 'seq'])
  })

  await knex.raw(`
    create function audit_refuse_change() returns trigger language plpgsql as $$
    begin
      raise exception 'audit entries are append-only (% on %)', tg_op, tg_table_name using errcode = 'insufficient_privilege';
    end $$`)
  for (const table of ['audit_events', 'audit_checkpoints']) {
    await knex.raw(`create trigger ${table}_no_update before update on ${table} for each row execute function audit_refuse_change()`)
    await knex.raw(`create trigger ${table}_no_truncate before truncate on ${table} for each statement execute function audit_refuse_change()`)
  }
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('audit_checkpoints')
  await knex.schema.dropTable('audit_chain_heads')
  await knex.schema.dropTable('audit_events')
  await knex.raw('drop function audit_refuse_change()')
}
