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
   * A session acts within the current grants of the private Application that authorized it as
   * well as its own: narrowing that Application narrows the session at once.
   */
  within?: Grants
}

/** Resolves a key hash to a principal; the authenticator tries each lookup in turn. */
export type PrincipalLookup = (keyHash: string) => Promise<Principal | undefined>
