import type { Knex } from 'knex'

// Frozen here: a migration must do the same thing whatever the permission table becomes.
const TOKEN_PERMISSIONS = ['token:create', 'token:update', 'token:read', 'token:search', 'token:delete', 'token:use']

/**
 * Authorization (issue 12):
 * - Sessions remember the key their creating and authorizing Applications had, so a regenerated
 *   key ends them; indexed by Application so a changed Application finds its sessions.
 * - Management Applications hold token permissions only as the ceiling of what they may grant.
 *   Each tenant's first management Application (the bootstrap one, and those `POST /tenants`
 *   made: the only ones with no creator) gets the full ceiling, so existing tenants keep
 *   working; management Applications created by other Applications get none until granted one.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('sessions', (t) => {
    t.string('created_by_key_hash', 64)
    t.string('authorized_by_key_hash', 64)
    t.index(['tenant_id', 'created_by'])
    t.index(['tenant_id', 'authorized_by'])
  })
  await knex.raw('update sessions set created_by_key_hash = a.key_hash from applications a where a.id = sessions.created_by')
  await knex.raw('update sessions set authorized_by_key_hash = a.key_hash from applications a where a.id = sessions.authorized_by')

  for (const app of await roots(knex)) {
    const priority = Math.max(0, ...app.rules.map((r) => r.priority)) + 1
    const ceiling = { description: 'Grant ceiling: every token permission, revealed, on every container', priority, container: '/', transform: 'reveal', permissions: TOKEN_PERMISSIONS }
    await knex('applications').where({ id: app.id }).update({ rules: JSON.stringify([...app.rules, ceiling]) })
  }
}

interface Row {
  id: string
  tenant_id: string
  created_by: string | null
  permissions: string[]
  rules: { priority: number }[]
}

/**
 * Each tenant's root management Applications: those no Application created. A tenant whose
 * root was deleted would otherwise be locked out of granting token access, so there the oldest
 * management Application that may create Applications stands in.
 */
async function roots(knex: Knex): Promise<Row[]> {
  const rows = (await knex('applications').where({ type: 'management' }).orderBy(['created_at', 'id']).select('id', 'tenant_id', 'created_by', 'permissions', 'rules')) as Row[]
  const byTenant = new Map<string, Row[]>()
  for (const row of rows) byTenant.set(row.tenant_id, [...(byTenant.get(row.tenant_id) ?? []), row])
  return [...byTenant.values()].flatMap((apps) => {
    const created = apps.filter((a) => a.created_by === null)
    if (created.length) return created
    const standIn = apps.find((a) => a.permissions.includes('application:create'))
    return standIn ? [standIn] : []
  })
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('sessions', (t) => {
    t.dropIndex(['tenant_id', 'authorized_by'])
    t.dropIndex(['tenant_id', 'created_by'])
    t.dropColumn('authorized_by_key_hash')
    t.dropColumn('created_by_key_hash')
  })
}
