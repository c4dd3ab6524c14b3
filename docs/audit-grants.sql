-- Grants for running Tessera on Postgres with an append-only audit log.
-- Run as the role that owns the schema (the one that ran the migrations, e.g. with a first
-- `npm start` as that role), after every upgrade that adds tables. Role names are examples:
--   tessera_app     the role in the servers' DATABASE_URL
--   tessera_pruner  the role `npm run audit-prune` runs as (only with SVC_AUDIT_PRUNE_IN_SERVICE=false)
-- Replace `public` if Tessera lives in another schema.

GRANT USAGE ON SCHEMA public TO tessera_app;
-- The service's own data: full use.
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO tessera_app;
-- The start-up migration check reads the migration list and takes its lock.
REVOKE ALL ON knex_migrations, knex_migrations_lock FROM tessera_app;
GRANT SELECT ON knex_migrations TO tessera_app;
GRANT SELECT, UPDATE ON knex_migrations_lock TO tessera_app;
-- The audit log: append and read, never change or remove. The chain heads move with every batch.
REVOKE ALL ON audit_events, audit_checkpoints, audit_chain_heads FROM tessera_app;
GRANT SELECT, INSERT ON audit_events, audit_checkpoints TO tessera_app;
GRANT SELECT, INSERT, UPDATE ON audit_chain_heads TO tessera_app;
-- With SVC_AUDIT_PRUNE_IN_SERVICE=true (the default) the servers prune expired entries
-- themselves; then, instead of the pruner role below:
--   GRANT DELETE ON audit_events, audit_checkpoints TO tessera_app;

-- Retention by a separate role (cron: DATABASE_URL=<pruner> npm run audit-prune).
GRANT USAGE ON SCHEMA public TO tessera_pruner;
GRANT SELECT, DELETE ON audit_events, audit_checkpoints TO tessera_pruner;
