import type { Knex } from 'knex'
import { deleteExpiredRows, EXPIRED_BATCH } from './expired-rows.js'

export interface IdempotencyRecord {
  tenant_id: string
  key: string
  fingerprint: string
  owner: string
  status: number | null
  body: string | null
  withheld: boolean
  lease_until: Date
  expires_at: Date
}

export interface IdempotencyClaim {
  tenantId: string
  key: string
  fingerprint: string
  owner: string
  leaseSeconds: number
  ttlSeconds: number
}

/**
 * Idempotency keys. Every time is the database's clock, so several Tessera processes agree on
 * leases and expiry whatever their own clocks say.
 */
export function idempotencyRepository(knex: Knex, leases: Knex = knex) {
  const inSeconds = (s: number, on: Knex = knex) => on.raw('now() + make_interval(secs => ?)', [s])

  return {
    /**
     * Takes the key for `claim.owner` in one statement: a new key, an expired one, or one whose
     * first request died in flight with the same fingerprint (its lease ran out). True when taken.
     */
    async claim(claim: IdempotencyClaim): Promise<boolean> {
      const rows = await knex('idempotency_keys')
        .insert({
          tenant_id: claim.tenantId,
          key: claim.key,
          fingerprint: claim.fingerprint,
          owner: claim.owner,
          status: null,
          body: null,
          withheld: false,
          lease_until: inSeconds(claim.leaseSeconds),
          expires_at: inSeconds(claim.ttlSeconds),
        })
        .onConflict(['tenant_id', 'key'])
        .merge()
        .where((q) =>
          q
            .where('idempotency_keys.expires_at', '<=', knex.fn.now())
            .orWhere((stale) =>
              stale.whereNull('idempotency_keys.status').where('idempotency_keys.lease_until', '<=', knex.fn.now()).where('idempotency_keys.fingerprint', claim.fingerprint),
            ),
        )
        .returning(['owner'])
      return rows.length > 0
    },
    async find(tenantId: string, key: string): Promise<IdempotencyRecord | undefined> {
      return knex<IdempotencyRecord>('idempotency_keys').where({ tenant_id: tenantId, key }).where('expires_at', '>', knex.fn.now()).first()
    },
    async complete(tenantId: string, key: string, owner: string, answer: { status: number; body: string | null; withheld: boolean }): Promise<void> {
      await knex('idempotency_keys').where({ tenant_id: tenantId, key, owner }).update(answer)
    },
    /** Extends the lease of a claim whose request still runs, on `leases` (not the request pool); false when `owner` no longer holds it. */
    async renew(tenantId: string, key: string, owner: string, leaseSeconds: number): Promise<boolean> {
      const renewed = await leases('idempotency_keys').where({ tenant_id: tenantId, key, owner }).whereNull('status').update({ lease_until: inSeconds(leaseSeconds, leases) }).returning(['owner'])
      return renewed.length > 0
    },
    /** Gives the key up (the first request failed): the next request with it runs afresh. */
    async release(tenantId: string, key: string, owner: string): Promise<void> {
      await knex('idempotency_keys').where({ tenant_id: tenantId, key, owner }).whereNull('status').delete()
    },
    async deleteExpired(batch = EXPIRED_BATCH): Promise<number> {
      let deleted = 0
      for await (const rows of deleteExpiredRows(knex, 'idempotency_keys', ['tenant_id', 'key'], (q) => q.where('expires_at', '<=', knex.fn.now()), ['key'], batch)) deleted += rows.length
      return deleted
    },
  }
}

export type IdempotencyRepository = ReturnType<typeof idempotencyRepository>
