import { randomUUID } from 'node:crypto'
import { holdsPermission, validatePermissions, validateRules, type AccessRule } from '../auth/access-rules.js'
import { generateApiKey, type KeyHasher } from '../auth/api-keys.js'
import type { Authenticator } from '../auth/authenticator.js'
import type { Principal, PrincipalLookup } from '../auth/principal.js'
import { AppError, ValidationError, type FieldErrors } from '../errors/index.js'
import type { AccessRuleRecord, Store } from '../store/index.js'

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
 * backend, which authorizes it. Until then the session key can do nothing.
 */
export function sessionsService(deps: { store: Store; hasher: KeyHasher; authenticator: Authenticator }) {
  const { store, hasher, authenticator } = deps
  return {
    async createSession(caller: Principal): Promise<{ session_key: string; nonce: string; expires_at: Date }> {
      if (caller.type !== 'public') throw new AppError('forbidden', { detail: 'Sessions are created with a public Application key.' })
      const sessionKey = generateApiKey()
      const nonce = generateApiKey('nonce_')
      const now = new Date()
      const expiresAt = new Date(now.getTime() + SESSION_LIFETIME_MS)
      await store.sessions.insert({
        id: randomUUID(),
        tenant_id: caller.tenantId,
        key_hash: hasher.hash(sessionKey),
        nonce_hash: hasher.hash(nonce),
        created_by: caller.id,
        permissions: [],
        rules: [],
        authorized_by: null,
        authorized_at: null,
        created_at: now,
        expires_at: expiresAt,
      })
      return { session_key: sessionKey, nonce, expires_at: expiresAt }
    },

    async authorizeSession(caller: Principal, grant: SessionGrant): Promise<{ expires_at: Date }> {
      if (caller.type !== 'private') throw new AppError('forbidden', { detail: 'Sessions are authorized with a private Application key.' })
      const permissions = grant.permissions ?? []
      const rules = grant.rules ?? []
      const errors: FieldErrors = { ...validatePermissions(permissions, 'session'), ...validateRules(rules, 'session') }
      if (!permissions.length && !rules.length) (errors.permissions ??= []).push('at least one of permissions and rules must be non-empty')
      const expiresAt = grant.expires_at ? new Date(grant.expires_at) : new Date(Date.now() + SESSION_LIFETIME_MS)
      const lifetime = expiresAt.getTime() - Date.now()
      if (lifetime <= 0 || lifetime > MAX_LIFETIME_MS) (errors.expires_at ??= []).push('must be in the future and within 24 hours')
      if (Object.keys(errors).length) throw new ValidationError(errors)
      // An authorizer can hand on only what it holds itself.
      for (const p of [...permissions, ...rules.flatMap((r) => r.permissions)]) {
        if (!holdsPermission(caller.rules as AccessRule[], caller.permissions, p)) {
          throw new AppError('forbidden', { detail: `The authorizing key does not hold ${p} itself.` })
        }
      }
      const session = await store.sessions.authorize(caller.tenantId, hasher.hash(grant.nonce), {
        permissions,
        rules,
        authorized_by: caller.id,
        authorized_at: new Date(),
        expires_at: expiresAt,
      })
      if (!session) throw new AppError('not_found', { detail: 'No session awaits authorization with this nonce.' })
      // The session key may already be cached with no grants.
      await authenticator.invalidateKey(session.key_hash)
      return { expires_at: expiresAt }
    },

    async sweepExpired(now = new Date()): Promise<number> {
      const hashes = await store.sessions.deleteExpired(now)
      for (const hash of hashes) await authenticator.invalidateKey(hash)
      return hashes.length
    },
  }
}

export type SessionsService = ReturnType<typeof sessionsService>

export function sessionLookup(store: Store): PrincipalLookup {
  return async (keyHash) => {
    const s = await store.sessions.findByKeyHash(keyHash)
    if (!s) return undefined
    return {
      kind: 'session',
      id: s.id,
      tenantId: s.tenant_id,
      type: 'session',
      permissions: s.permissions,
      rules: s.rules,
      expiresAt: new Date(s.expires_at),
      keyHash: s.key_hash,
    }
  }
}
