import type { AccessRuleRecord, ApplicationType } from '../store/index.js'

/** Who a request acts as: an Application, or a session created by a public Application. */
export interface Principal {
  kind: 'application' | 'session'
  id: string
  tenantId: string
  type: ApplicationType | 'session'
  permissions: string[]
  rules: AccessRuleRecord[]
  expiresAt: Date | null
  keyHash: string
}

/** Resolves a key hash to a principal; the authenticator tries each lookup in turn. */
export type PrincipalLookup = (keyHash: string) => Promise<Principal | undefined>
