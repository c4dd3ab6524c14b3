import type { Knex } from 'knex'
import { deleteExpiredRows, EXPIRED_BATCH } from './expired-rows.js'
import type { AccessRuleRecord } from './types.js'

export interface SessionRecord {
  id: string
  tenant_id: string
  key_hash: string
  nonce_hash: string
  created_by: string
  /** The key the creating (public) Application had: a session outlives no regeneration of it. */
  created_by_key_hash: string | null
  permissions: string[]
  rules: AccessRuleRecord[]
  authorized_by: string | null
  /** The key the authorizing (private) Application had when it authorized the session. */
  authorized_by_key_hash: string | null
  authorized_at: Date | null
  created_at: Date
  expires_at: Date
}

/**
 * The authorized sessions (those holding grants) an Application created or authorized. Pending
 * ones are left out: anyone holding a public key makes them, as many as its rate allows, so a
 * statement over all of them inside an Application's change could be made to outrun every
 * time-out and block that change. They hold nothing, end within minutes, and are refused once
 * their creator's key changes or goes (sessionLookup).
 */
function ofApplication(knex: Knex, tenantId: string, applicationId: string) {
  return knex('sessions')
    .where({ tenant_id: tenantId })
    .whereNotNull('authorized_at')
    .where((q) => q.where('created_by', applicationId).orWhere('authorized_by', applicationId))
}

export function sessionsRepository(knex: Knex) {
  return {
    async insert(row: SessionRecord): Promise<void> {
      await knex('sessions').insert({ ...row, permissions: JSON.stringify(row.permissions), rules: JSON.stringify(row.rules) })
    },
    async findByKeyHash(keyHash: string): Promise<SessionRecord | undefined> {
      return knex<SessionRecord>('sessions').where({ key_hash: keyHash }).first()
    },
    /** The session awaiting authorization with this nonce, unexpired at `at`. */
    async findPending(tenantId: string, nonceHash: string, at: Date): Promise<SessionRecord | undefined> {
      return knex<SessionRecord>('sessions').where({ tenant_id: tenantId, nonce_hash: nonceHash }).whereNull('authorized_at').where('expires_at', '>', at).first()
    },
    /** Grants a not-yet-authorized, unexpired session of `tenantId`; returns it, or undefined. */
    async authorize(
      tenantId: string,
      nonceHash: string,
      grant: Pick<SessionRecord, 'permissions' | 'rules' | 'authorized_by' | 'authorized_by_key_hash' | 'authorized_at' | 'expires_at'>,
      trx: Knex = knex,
    ): Promise<SessionRecord | undefined> {
      const [row] = await trx<SessionRecord>('sessions')
        .where({ tenant_id: tenantId, nonce_hash: nonceHash })
        .whereNull('authorized_at')
        // Unexpired at the instant it is authorized (the service's clock, as every expiry decision).
        .where('expires_at', '>', grant.authorized_at)
        .update({ ...grant, permissions: JSON.stringify(grant.permissions) as never, rules: JSON.stringify(grant.rules) as never })
        .returning('*')
      return row as SessionRecord | undefined
    },
    /** Key hashes of the authorized sessions an Application created or authorized (to drop them from caches). */
    async keyHashesOf(tenantId: string, applicationId: string, trx: Knex = knex): Promise<string[]> {
      const rows = await ofApplication(trx, tenantId, applicationId).select('key_hash')
      return (rows as { key_hash: string }[]).map((r) => r.key_hash)
    },
    /** Ends the authorized sessions an Application created or authorized; returns their key hashes. */
    async deleteOf(tenantId: string, applicationId: string, trx: Knex = knex): Promise<string[]> {
      const rows = await ofApplication(trx, tenantId, applicationId).delete().returning(['key_hash'])
      return (rows as { key_hash: string }[]).map((r) => r.key_hash)
    },
    /** Ends the sessions created or authorized with one key; returns their key hashes. */
    async deleteOfKey(tenantId: string, keyHash: string, trx: Knex = knex): Promise<string[]> {
      // Authorized ones only, as ofApplication; pending ones made with the key are refused once it is gone.
      const rows = await trx('sessions')
        .where({ tenant_id: tenantId })
        .whereNotNull('authorized_at')
        .where((q) => q.where('created_by_key_hash', keyHash).orWhere('authorized_by_key_hash', keyHash))
        .delete()
        .returning(['key_hash'])
      return (rows as { key_hash: string }[]).map((r) => r.key_hash)
    },
    /**
     * Ends the sessions, pending or authorized, that Applications expired at `now` created or
     * authorized, `batch` per statement, through the Applications' expiry index and the sessions'
     * indexes by creator and authorizer. Those expired by `now` themselves are left to
     * deleteExpired: a session ends no later than the Applications behind it, so these are only
     * rows that outlive them, and the two sweeps, run side by side, never delete the same rows.
     */
    async deleteOfExpiredApplications(now: Date, batch = EXPIRED_BATCH): Promise<number> {
      const expired = () => knex('applications').select('tenant_id', 'id').where('expires_at', '<=', now)
      let deleted = 0
      for (const by of ['created_by', 'authorized_by']) {
        const ofExpired = (q: Knex.QueryBuilder) => q.whereIn(['tenant_id', by], expired()).where('expires_at', '>', now)
        for await (const rows of deleteExpiredRows(knex, 'sessions', ['id'], ofExpired, ['id'], batch)) deleted += rows.length
      }
      return deleted
    },
    async deleteExpired(now: Date, batch = EXPIRED_BATCH): Promise<number> {
      let deleted = 0
      for await (const rows of deleteExpiredRows(knex, 'sessions', ['id'], (q) => q.where('expires_at', '<=', now), ['id'], batch)) deleted += rows.length
      return deleted
    },
  }
}

export type SessionsRepository = ReturnType<typeof sessionsRepository>
