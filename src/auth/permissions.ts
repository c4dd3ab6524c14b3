import type { AccessRuleRecord, ApplicationType } from '../store/index.js'

const TOKEN_WRITE = ['private', 'public'] as const satisfies readonly ApplicationType[]
const TOKEN_PRIVATE = ['private'] as const satisfies readonly ApplicationType[]
const MANAGEMENT = ['management'] as const satisfies readonly ApplicationType[]

/**
 * Every permission and the Application types that may act with it (API.md "Permissions and
 * Application types"). The `Permission` type is derived from this table, so a misspelt
 * permission anywhere in the code does not compile.
 */
const TABLE = [
  { type: 'token:create', description: 'Create tokens', application_types: TOKEN_WRITE },
  { type: 'token:update', description: 'Update tokens', application_types: TOKEN_WRITE },
  { type: 'token:read', description: 'Read tokens and detokenize', application_types: TOKEN_PRIVATE },
  { type: 'token:search', description: 'Search tokens', application_types: TOKEN_PRIVATE },
  { type: 'token:delete', description: 'Delete tokens', application_types: TOKEN_PRIVATE },
  { type: 'token:use', description: 'Use tokens in the proxy and Reactors', application_types: TOKEN_PRIVATE },
  { type: 'application:create', description: 'Create applications', application_types: MANAGEMENT },
  { type: 'application:read', description: 'Read applications', application_types: MANAGEMENT },
  { type: 'application:update', description: 'Update applications and regenerate their keys', application_types: MANAGEMENT },
  { type: 'application:delete', description: 'Delete applications', application_types: MANAGEMENT },
  { type: 'reactor:create', description: 'Create reactors', application_types: MANAGEMENT },
  { type: 'reactor:read', description: 'Read reactors', application_types: MANAGEMENT },
  { type: 'reactor:update', description: 'Update reactors', application_types: MANAGEMENT },
  { type: 'reactor:delete', description: 'Delete reactors', application_types: MANAGEMENT },
  { type: 'proxy:create', description: 'Create proxies', application_types: MANAGEMENT },
  { type: 'proxy:read', description: 'Read proxies', application_types: MANAGEMENT },
  { type: 'proxy:update', description: 'Update proxies', application_types: MANAGEMENT },
  { type: 'proxy:delete', description: 'Delete proxies', application_types: MANAGEMENT },
  { type: 'tenant:read', description: 'Read the tenant', application_types: MANAGEMENT },
  { type: 'tenant:update', description: 'Update the tenant settings', application_types: MANAGEMENT },
  { type: 'log:read', description: 'Read logs', application_types: MANAGEMENT },
] as const

export type Permission = (typeof TABLE)[number]['type']
export type TokenPermission = Extract<Permission, `token:${string}`>

export interface PermissionInfo {
  type: Permission
  description: string
  application_types: readonly ApplicationType[]
}

export const permissions: readonly PermissionInfo[] = TABLE

const byName = new Map<string, PermissionInfo>(permissions.map((p) => [p.type, p]))

export const TOKEN_PERMISSIONS: readonly TokenPermission[] = TABLE.map((p) => p.type).filter(isTokenPermission)

export function isKnownPermission(name: string): name is Permission {
  return byName.has(name)
}

export function isTokenPermission(name: string): name is TokenPermission {
  return name.startsWith('token:') && byName.has(name)
}

/**
 * Whether an Application of `type` may be granted `permission`. A management Application may
 * also hold token permissions, but only as the ceiling of what it may hand out (to the
 * Applications it creates and the proxies and Reactors it binds them to): they never let its
 * own key act on tokens (see policies.ts).
 */
export function mayHold(type: ApplicationType, permission: string): boolean {
  const info = byName.get(permission)
  if (info === undefined) return false
  return info.application_types.includes(type) || (type === 'management' && isTokenPermission(permission))
}

/** The permissions an Application of `type` acts with (not the ceiling a management Application may hold). */
export function permissionsFor(type: ApplicationType): Permission[] {
  return permissions.filter((p) => p.application_types.includes(type)).map((p) => p.type)
}

/** The rule that lets a management Application grant every token permission: the bootstrap one holds it. */
export function fullCeiling(): AccessRuleRecord {
  return {
    description: 'Grant ceiling: every token permission, revealed, on every container',
    priority: 1,
    container: '/',
    transform: 'reveal',
    permissions: [...TOKEN_PERMISSIONS],
  }
}
