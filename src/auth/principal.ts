import type { AccessRuleRecord, ApplicationType } from '../store/index.js'
import type { Grants } from './grants.js'

/** Who a request acts as: an Application, or a session created by a public Application. */
export interface Principal {
  kind: 'application' | 'session'
  id: string
  tenantId: string
  type: ApplicationType | 'session'
  permissions: string[]
  rules: AccessRuleRecord[]
  /** The earliest instant this principal stops acting (for a session: its own or its Applications'). */
  expiresAt: Date | null
  keyHash: string
  /**
   * Grants this principal acts within as well as its own (each bounds every decision): a
   * session's authorizer's, code's binder's, the saver's of the code or destination a caller's
   * data goes to. Their current grants: narrowing one narrows the principal at once.
   */
  within?: readonly Grants[]
}

/** Resolves a key hash to a principal; the authenticator tries each lookup in turn. */
export type PrincipalLookup = (keyHash: string) => Promise<Principal | undefined>
