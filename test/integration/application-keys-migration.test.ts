import { randomUUID } from 'node:crypto'
import t from 'tap'
import { migrationSource } from '../../migrations/index.js'
import { databaseBefore } from '../helpers/migrations.js'
import { applicationLookup } from '../../src/auth/application-lookup.js'
import type { Store } from '../../src/store/index.js'
import { applicationKeysRepository } from '../../src/store/repositories/application-keys.js'
import { applicationsRepository } from '../../src/store/repositories/applications.js'

// An existing database: the Applications' keys stay where they are and keep authenticating;
// extra keys are found beside them.
t.test('the application keys migration on an existing database', async (t) => {
  const knex = await databaseBefore(t, '20261126000000_application_keys')
  const now = new Date()
  const tenant = randomUUID()
  const app = randomUUID()
  await knex('tenants').insert({ id: tenant, name: 'old', settings: '{}', created_at: now, modified_at: now })
  await knex('applications').insert({ id: app, tenant_id: tenant, name: 'old', type: 'private', key_hash: 'a'.repeat(64), permissions: '["token:read"]', rules: '[]', created_by: null, created_at: now, modified_by: null, modified_at: now })

  await knex.migrate.latest({ migrationSource })
  const store = { applications: applicationsRepository(knex), applicationKeys: applicationKeysRepository(knex) } as unknown as Store
  const lookup = applicationLookup(store)
  t.match(await lookup('a'.repeat(64)), { id: app, keyHash: 'a'.repeat(64) }, 'the existing key authenticates')
  t.ok(await knex.transaction((trx) => store.applicationKeys.insertBounded({ id: randomUUID(), tenant_id: tenant, application_id: app, key_hash: 'b'.repeat(64), created_by: null, created_at: now }, 10, trx)))
  t.match(await lookup('b'.repeat(64)), { id: app, keyHash: 'b'.repeat(64) }, 'an extra key authenticates as its Application')
  t.equal(await lookup('c'.repeat(64)), undefined)
  await knex('applications').where({ id: app }).delete()
  t.equal(await lookup('b'.repeat(64)), undefined, 'extra keys go with their Application')
  await knex.migrate.down({ migrationSource, name: '20261126000000_application_keys' })
  t.notOk(await knex.schema.hasTable('application_keys'), 'down drops the table')
})
