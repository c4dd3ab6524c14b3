import { randomUUID } from 'node:crypto'
import t from 'tap'
import { migrationSource } from '../../migrations/index.js'
import { databaseBefore } from '../helpers/migrations.js'

// An existing database: its bootstrap management Application keeps working (it gets the full
// grant ceiling), other management Applications get none, and live sessions stay tied to the
// keys their Applications hold.
t.test('the authorization migration on an existing database', async (t) => {
  const knex = await databaseBefore(t, '20261124000000_authorization')
  const now = new Date()
  const tenant = randomUUID()
  await knex('tenants').insert({ id: tenant, name: 'old', settings: '{}', created_at: now, modified_at: now })
  const app = (id: string, type: string, createdBy: string | null, keyHash: string, rules: unknown[] = []) => ({
    id, tenant_id: tenant, name: id.slice(0, 8), type, key_hash: keyHash, permissions: JSON.stringify(['application:create']), rules: JSON.stringify(rules),
    created_by: createdBy, created_at: now, modified_by: null, modified_at: now,
  })
  const [root, other, pub, priv] = [randomUUID(), randomUUID(), randomUUID(), randomUUID()]
  await knex('applications').insert([
    app(root, 'management', null, 'a'.repeat(64), [{ priority: 3, transform: 'redact', permissions: ['log:read'] }]),
    app(other, 'management', root, 'b'.repeat(64)),
    app(pub, 'public', root, 'c'.repeat(64)),
    app(priv, 'private', root, 'd'.repeat(64)),
  ])
  // A tenant whose root was deleted: its oldest management Application that may create stands in.
  const orphan = randomUUID()
  await knex('tenants').insert({ id: orphan, name: 'orphan', settings: '{}', created_at: now, modified_at: now })
  const [standIn, younger] = [randomUUID(), randomUUID()]
  await knex('applications').insert([
    { ...app(standIn, 'management', root, '1'.repeat(64)), tenant_id: orphan },
    { ...app(younger, 'management', standIn, '2'.repeat(64)), tenant_id: orphan, created_at: new Date(now.getTime() + 1000) },
  ])
  const session = { id: randomUUID(), tenant_id: tenant, key_hash: 'e'.repeat(64), nonce_hash: 'f'.repeat(64), created_by: pub, authorized_by: priv, authorized_at: now, created_at: now, expires_at: new Date(Date.now() + 60_000) }
  await knex('sessions').insert(session)

  await knex.migrate.latest({ migrationSource })
  const rules = async (id: string) => (await knex('applications').where({ id }).first()).rules
  t.match(await rules(root), [{ priority: 3 }, { priority: 4, container: '/', transform: 'reveal', permissions: ['token:create', 'token:update', 'token:read', 'token:search', 'token:delete', 'token:use'] }])
  t.same(await rules(other), [], 'a management Application made by another gets no ceiling')
  t.match(await rules(standIn), [{ container: '/', transform: 'reveal' }], 'a stand-in where the root is gone')
  t.same(await rules(younger), [])
  t.match(await knex('sessions').where({ id: session.id }).first(), { created_by_key_hash: 'c'.repeat(64), authorized_by_key_hash: 'd'.repeat(64) })
  await knex.migrate.down({ migrationSource, name: '20261124000000_authorization' })
  t.notOk(await knex.schema.hasColumn('sessions', 'created_by_key_hash'), 'down removes the columns')
})
