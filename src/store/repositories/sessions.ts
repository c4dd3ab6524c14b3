import type { Knex } from 'knex'
import type { AccessRuleRecord } from './types.js'

export interface SessionRecord {
  id: string
  tenant_id: string
  key_hash: string
  nonce_hash: string
  created_by: string
  permissions: string[]
  rules: AccessRuleRecord[]
  authorized_by: string | null
  authorized_at: Date | null
  created_at: Date
  expires_at: Date
}

export function sessionsRepository(knex: Knex) {
  return {
    async insert(row: SessionRecord): Promise<void> {
      await knex('sessions').insert({ ...row, permissions: JSON.stringify(row.permissions), rules: JSON.stringify(row.rules) })
    },
    async findByKeyHash(keyHash: string): Promise<SessionRecord | undefined> {
      return knex<SessionRecord>('sessions').where({ key_hash: keyHash }).first()
    },
    /** Grants a not-yet-authorized, unexpired session of `tenantId`; returns it, or undefined. */
    async authorize(
      tenantId: string,
      nonceHash: string,
      grant: Pick<SessionRecord, 'permissions' | 'rules' | 'authorized_by' | 'authorized_at' | 'expires_at'>,
    ): Promise<SessionRecord | undefined> {
      const [row] = await knex<SessionRecord>('sessions')
        .where({ tenant_id: tenantId, nonce_hash: nonceHash })
        .whereNull('authorized_at')
        .where('expires_at', '>', knex.fn.now())
        .update({ ...grant, permissions: JSON.stringify(grant.permissions) as never, rules: JSON.stringify(grant.rules) as never })
        .returning('*')
      return row as SessionRecord | undefined
    },
    async deleteExpired(now: Date): Promise<string[]> {
      const rows = await knex('sessions').where('expires_at', '<=', now).delete().returning(['key_hash'])
      return (rows as { key_hash: string }[]).map((r) => r.key_hash)
    },
  }
}

export type SessionsRepository = ReturnType<typeof sessionsRepository>
