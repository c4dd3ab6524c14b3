import { randomUUID } from 'node:crypto'
import { validatePermissions, validateRules } from '../auth/access-rules.js'
import { generateApiKey, newApiKey, type ApiKeyHasher } from '../auth/api-keys.js'
import { applicationPrincipal, holdsKey } from '../auth/application-lookup.js'
import type { Authenticator } from '../auth/authenticator.js'
import { authorizeGrant, authorizeSessionStep } from '../auth/policies.js'
import type { Principal, PrincipalLookup } from '../auth/principal.js'
import type { Clock } from '../clock.js'
import { AppError, ValidationError, type FieldErrors } from '../errors/index.js'
import type { AccessRuleRecord, ApplicationRecord, SessionRecord, Store, StoreTransaction } from '../store/index.js'
import { isUncertainWrite } from '../store/unavailable.js'

export const SESSION_LIFETIME_MS = 3 * 60 * 1000
const MAX_LIFETIME_MS = 24 * 60 * 60 * 1000

export interface SessionGrant {
  nonce: string
  permissions?: string[]
  rules?: AccessRuleRecord[]
  expires_at?: string
}

/**
 * Sessions let a browser or mobile client (public Application) act with grants a backend
 * (private Application) gives it: the client creates a session and passes the nonce to its
 * backend, which authorizes it. Until then the session key can do nothing. A session lives no
 * longer than either Application and acts within its authorizer's current grants (see
 * `sessionLookup`).
 */
export function sessionsService(deps: { store: Store; hasher: ApiKeyHasher; authenticator: Authenticator; clock: Clock }) {
  const { store, hasher, authenticator, clock } = deps

  /**
   * The authorizer's and the creator's rows, locked (in id order) as every change of an
   * Application's grants or keys locks its row before it lists the sessions to end or
   * invalidate: this grant is then either in that list or judged against what the change made.
   * Without the lock, a grant committed between a change's list and its commit stayed cached
   * with the old grants. 401 when the authorizer's key went meanwhile.
   */
  async function lockVouchers(caller: Principal, pending: SessionRecord, trx: StoreTransaction): Promise<{ authorizer: Principal; creator: ApplicationRecord }> {
    const locked = new Map<string, ApplicationRecord | undefined>()
    for (const id of [...new Set([caller.id, pending.created_by])].sort()) locked.set(id, await store.applications.lock(caller.tenantId, id, trx))
    const authorizer = locked.get(caller.id)
    if (authorizer === undefined || !(await holdsKey(store, authorizer, caller.keyHash, trx))) throw new AppError('unauthenticated', { detail: 'The API key is not valid.' })
    // A session whose creator went, no longer holds the key it was made with, or was narrowed
    // since (which ended its authorized sessions), is already dead.
    const creator = locked.get(pending.created_by)
    const narrowedSince = creator?.grants_narrowed_at != null && creator.grants_narrowed_at >= pending.created_at
    if (creator === undefined || narrowedSince || !(await holdsKey(store, creator, pending.created_by_key_hash, trx))) throw noPendingSession()
    return { authorizer: applicationPrincipal(authorizer, caller.keyHash), creator }
  }

  return {
    async createSession(caller: Principal): Promise<{ id: string; session_key: string; nonce: string; expires_at: Date }> {
      authorizeSessionStep(caller, 'create')
      const sessionKey = newApiKey('session')
      const nonce = generateApiKey('nonce_')
      const now = new Date(clock())
      // A session ends with its creator (see sessionLookup): answered as it will be.
      const expiresAt = earliest(new Date(now.getTime() + SESSION_LIFETIME_MS), caller.expiresAt)
      const id = randomUUID()
      await store.sessions.insert({
        id,
        tenant_id: caller.tenantId,
        key_hash: hasher.hash(sessionKey),
        nonce_hash: hasher.hash(nonce),
        created_by: caller.id,
        created_by_key_hash: caller.keyHash,
        permissions: [],
        rules: [],
        authorized_by: null,
        authorized_by_key_hash: null,
        authorized_at: null,
        created_at: now,
        expires_at: expiresAt,
      })
      return { id, session_key: sessionKey, nonce, expires_at: expiresAt }
    },

    /**
     * `record` writes the `session.authorize` entry inside the granting transaction: the session
     * key was shown at create, so a grant whose entry failed would be usable unrecorded.
     */
    async authorizeSession(caller: Principal, grant: SessionGrant, record: (trx: StoreTransaction, sessionId: string) => Promise<void>): Promise<{ id: string; expires_at: Date }> {
      authorizeSessionStep(caller, 'authorize')
      const permissions = grant.permissions ?? []
      const rules = grant.rules ?? []
      const errors: FieldErrors = { ...validatePermissions(permissions, 'session'), ...validateRules(rules, 'session') }
      if (!permissions.length && !rules.length) (errors.permissions ??= []).push('at least one of permissions and rules must be non-empty')
      const now = new Date(clock())
      const expiresAt = grant.expires_at ? new Date(grant.expires_at) : new Date(now.getTime() + SESSION_LIFETIME_MS)
      const lifetime = expiresAt.getTime() - now.getTime()
      if (lifetime <= 0 || lifetime > MAX_LIFETIME_MS) (errors.expires_at ??= []).push('must be in the future and within 24 hours')
      if (Object.keys(errors).length) throw new ValidationError(errors)
      // Nothing is judged for a nonce that names no session: the grant check is the costly part.
      const nonceHash = hasher.hash(grant.nonce)
      const pending = await store.sessions.findPending(caller.tenantId, nonceHash, now)
      if (!pending) throw noPendingSession()
      // The session key may already be cached with no grants: invalidated once the grant
      // commits, or when the commit's answer was lost (the grant may stand).
      const session = await store
        .transaction(async (trx) => {
          const { authorizer, creator } = await lockVouchers(caller, pending, trx)
          // An authorizer can hand on only what it holds itself (containers, conditions and
          // transforms included), as its row is now.
          authorizeGrant(authorizer, { permissions, rules }, { what: 'The session grant' })
          // A session ends with its creator and its authorizer (see sessionLookup): stored and answered as it will be.
          const ends = earliest(earliest(expiresAt, authorizer.expiresAt), creator.expires_at)
          const values = { permissions, rules, authorized_by: caller.id, authorized_by_key_hash: caller.keyHash, authorized_at: now, expires_at: ends }
          const authorized = await store.sessions.authorize(caller.tenantId, nonceHash, values, trx)
          if (!authorized) throw noPendingSession()
          await record(trx, authorized.id)
          return authorized
        })
        .catch(async (err: unknown) => {
          if (!(err instanceof AppError) || isUncertainWrite(err)) await authenticator.invalidateKey(pending.key_hash)
          throw err
        })
      await authenticator.invalidateKey(session.key_hash)
      return { id: session.id, expires_at: session.expires_at }
    },

    /**
     * Reclaims the rows of sessions expired before `now`. Nothing is invalidated: a cached session
     * principal carries its expiry and is refused from that instant (see sessionLookup), and its
     * entry goes with the cache's time-to-live. A NOTIFY per key (tens of thousands after a busy
     * day) or one "every key" (every process reloading every principal) would cost more than it frees.
     */
    sweepExpired(now = new Date(clock())): Promise<number> {
      return store.sessions.deleteExpired(now)
    },
  }
}

export type SessionsService = ReturnType<typeof sessionsService>

function noPendingSession(): AppError {
  return new AppError('not_found', { detail: 'No session awaits authorization with this nonce.' })
}

function earliest(a: Date, b: Date | null): Date {
  return b !== null && b < a ? b : a
}

/**
 * A session key as a principal, tied to the Applications behind it: it stops when either is
 * deleted, expires, has its key regenerated or the extra key deleted (the key it was created or
 * authorized with is no longer theirs), and it acts within its authorizer's current grants. The Applications service
 * invalidates the session keys of an Application it changes, so this holds on every process at once.
 */
export function sessionLookup(store: Store): PrincipalLookup {
  const current = async (tenantId: string, id: string | null, keyHash: string | null) => {
    const app = id === null ? undefined : await store.applications.findById(tenantId, id)
    return app !== undefined && (await holdsKey(store, app, keyHash)) ? applicationPrincipal(app, keyHash ?? undefined) : undefined
  }
  return async (keyHash) => {
    const s = await store.sessions.findByKeyHash(keyHash)
    if (!s) return undefined
    const creator = await current(s.tenant_id, s.created_by, s.created_by_key_hash)
    if (creator === undefined) return undefined
    const authorizer = s.authorized_by === null ? undefined : await current(s.tenant_id, s.authorized_by, s.authorized_by_key_hash)
    if (s.authorized_by !== null && authorizer === undefined) return undefined
    const expiries = [new Date(s.expires_at), creator.expiresAt, authorizer?.expiresAt ?? null].filter((d): d is Date => d !== null)
    return {
      kind: 'session',
      id: s.id,
      tenantId: s.tenant_id,
      type: 'session',
      permissions: s.permissions,
      rules: s.rules,
      expiresAt: new Date(Math.min(...expiries.map((d) => d.getTime()))),
      keyHash: s.key_hash,
      // Not yet authorized: no grants of its own, so nothing to bound.
      within: authorizer && [{ permissions: authorizer.permissions, rules: authorizer.rules }],
    }
  }
}
