import type { ApplicationType } from '../store/index.js'

export interface PermissionInfo {
  type: string
  description: string
  application_types: ApplicationType[]
}

const TOKEN_WRITE: ApplicationType[] = ['private', 'public']
const TOKEN_PRIVATE: ApplicationType[] = ['private']
const MANAGEMENT: ApplicationType[] = ['management']

/** Every permission and the Application types that may hold it (API.md "Permissions and Application types"). */
export const permissions: readonly PermissionInfo[] = [
  { type: 'token:create', description: 'Create tokens', application_types: TOKEN_WRITE },
  { type: 'token:update', description: 'Update tokens', application_types: TOKEN_WRITE },
  { type: 'token:read', description: 'Read tokens and detokenize', application_types: TOKEN_PRIVATE },
  { type: 'token:search', description: 'Search tokens', application_types: TOKEN_PRIVATE },
  { type: 'token:delete', description: 'Delete tokens', application_types: TOKEN_PRIVATE },
  { type: 'token:use', description: 'Use tokens in the proxy and Reactors', application_types: TOKEN_PRIVATE },
  ...['application', 'reactor', 'proxy'].flatMap((resource) =>
    ['create', 'read', 'update', 'delete'].map((verb) => ({
      type: `${resource}:${verb}`,
      description: `${verb[0]!.toUpperCase()}${verb.slice(1)} ${resource}s`,
      application_types: MANAGEMENT,
    })),
  ),
  { type: 'tenant:read', description: 'Read the tenant', application_types: MANAGEMENT },
  { type: 'tenant:update', description: 'Update the tenant settings', application_types: MANAGEMENT },
  { type: 'log:read', description: 'Read logs', application_types: MANAGEMENT },
]

const byName = new Map(permissions.map((p) => [p.type, p]))

export function isKnownPermission(name: string): boolean {
  return byName.has(name)
}

export function mayHold(type: ApplicationType, permission: string): boolean {
  return byName.get(permission)?.application_types.includes(type) ?? false
}

export function permissionsFor(type: ApplicationType): string[] {
  return permissions.filter((p) => p.application_types.includes(type)).map((p) => p.type)
}
