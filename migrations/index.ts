import type { Knex } from 'knex'
import * as foundation from './20261122000000_foundation.js'
import * as vault from './20261122000100_vault.js'
import * as reactors from './20261122000200_reactors.js'
import * as proxies from './20261122000300_proxies.js'
import * as authorization from './20261124000000_authorization.js'
import * as idempotency from './20261125000000_idempotency.js'
import * as audit from './20261125000000_audit.js'
import * as applicationKeys from './20261126000000_application_keys.js'
import * as auditTimes from './20261129000000_audit_times.js'
import * as tokenTestMarks from './20261129000100_token_test_marks.js'
import * as codeBinders from './20261129000200_code_binders.js'
import * as codeSavers from './20261130000000_code_savers.js'
import * as sessionKeyIndexes from './20261130000100_session_key_indexes.js'
import * as applicationNarrowedAt from './20261130000200_application_narrowed_at.js'

interface Migration {
  up(knex: Knex): Promise<void>
  down(knex: Knex): Promise<void>
}

/** Migrations in order. Imported, not globbed, so they run the same from TypeScript and from dist/. */
const migrations: Record<string, Migration> = {
  '20261122000000_foundation': foundation,
  '20261122000100_vault': vault,
  '20261122000200_reactors': reactors,
  '20261122000300_proxies': proxies,
  '20261124000000_authorization': authorization,
  '20261125000000_idempotency': idempotency,
  '20261125000000_audit': audit,
  '20261126000000_application_keys': applicationKeys,
  '20261129000000_audit_times': auditTimes,
  '20261129000100_token_test_marks': tokenTestMarks,
  '20261129000200_code_binders': codeBinders,
  '20261130000000_code_savers': codeSavers,
  '20261130000100_session_key_indexes': sessionKeyIndexes,
  '20261130000200_application_narrowed_at': applicationNarrowedAt,
}

export const migrationSource: Knex.MigrationSource<string> = {
  getMigrations: async () => Object.keys(migrations),
  getMigrationName: (name) => name,
  getMigration: async (name) => {
    const m = migrations[name]
    if (!m) throw new Error(`unknown migration ${name}`)
    return m
  },
}
