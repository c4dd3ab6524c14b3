import { permissions, type Permission, type PermissionInfo } from './permissions.js'

/** One operation of the API and what it needs; listed by `GET /permissions` and in the README. */
export interface Operation {
  /** `METHOD /path`, as the README and `GET /permissions` show it. */
  operation: string
  /** The permission the caller must hold (on the tokens involved, for token permissions); null when none. */
  permission: Permission | null
  /** Which keys may call it and what else is checked (see policies.ts). */
  who: string
}

const MANAGEMENT = 'management key'
const TARGET = "management key; the Application's grants within its own"
const TOKENS = 'private or public key, or session'
const PRIVATE = 'private key or session'

/** Every authenticated operation. A test calls each with a key lacking its permission and expects 403 naming it. */
export const operations: readonly Operation[] = [
  { operation: 'POST /applications', permission: 'application:create', who: 'management key; the new grants within its own' },
  { operation: 'GET /applications', permission: 'application:read', who: MANAGEMENT },
  { operation: 'GET /applications/key', permission: 'application:read', who: MANAGEMENT },
  { operation: 'GET /applications/{id}', permission: 'application:read', who: MANAGEMENT },
  { operation: 'PUT /applications/{id}', permission: 'application:update', who: `${TARGET}, before and after; never its own grants` },
  { operation: 'POST /applications/{id}/regenerate', permission: 'application:update', who: TARGET },
  { operation: 'POST /applications/{id}/keys', permission: 'application:update', who: TARGET },
  { operation: 'GET /applications/{id}/keys', permission: 'application:read', who: MANAGEMENT },
  { operation: 'GET /applications/{id}/keys/{keyId}', permission: 'application:read', who: MANAGEMENT },
  { operation: 'DELETE /applications/{id}/keys/{keyId}', permission: 'application:update', who: TARGET },
  { operation: 'DELETE /applications/{id}', permission: 'application:delete', who: TARGET },
  { operation: 'POST /tokens', permission: 'token:create', who: `${TOKENS}; on every container of the token` },
  { operation: 'GET /tokens', permission: 'token:read', who: PRIVATE },
  { operation: 'POST /tokens/search', permission: 'token:search', who: `${PRIVATE}; data shown as token:read allows` },
  { operation: 'GET /v2/tokens', permission: 'token:read', who: `${PRIVATE}; cursor pages` },
  { operation: 'POST /v2/tokens/search', permission: 'token:search', who: `${PRIVATE}; data shown as token:read allows; cursor pages` },
  { operation: 'GET /tokens/{id}', permission: 'token:read', who: PRIVATE },
  { operation: 'PATCH /tokens/{id}', permission: 'token:update', who: `${TOKENS}; moving containers needs it on each and must not raise the caller's own access; changing mask, fingerprint_expression or search_indexes needs reveal` },
  { operation: 'DELETE /tokens/{id}', permission: 'token:delete', who: PRIVATE },
  { operation: 'POST /tokenize', permission: 'token:create', who: `${TOKENS}; on every container of each token` },
  { operation: 'POST /detokenize', permission: 'token:read', who: PRIVATE },
  { operation: 'POST /sessions', permission: null, who: 'public key' },
  { operation: 'POST /sessions/authorize', permission: null, who: 'private key; the session grant must be within its own' },
  { operation: 'POST /reactors', permission: 'reactor:create', who: `${MANAGEMENT}; a bound Application's grants must be within its own` },
  { operation: 'GET /reactors', permission: 'reactor:read', who: MANAGEMENT },
  { operation: 'GET /reactors/{id}', permission: 'reactor:read', who: MANAGEMENT },
  { operation: 'PUT /reactors/{id}', permission: 'reactor:update', who: `${MANAGEMENT}; old and new bound Application within its own` },
  { operation: 'DELETE /reactors/{id}', permission: 'reactor:delete', who: `${MANAGEMENT}; the bound Application within its own` },
  { operation: 'POST /reactors/{id}/react', permission: 'token:use', who: 'private key; on every token in args' },
  { operation: 'POST /proxies', permission: 'proxy:create', who: `${MANAGEMENT}; a bound Application's grants must be within its own` },
  { operation: 'GET /proxies', permission: 'proxy:read', who: MANAGEMENT },
  { operation: 'GET /proxies/{id}', permission: 'proxy:read', who: MANAGEMENT },
  { operation: 'PUT /proxies/{id}', permission: 'proxy:update', who: `${MANAGEMENT}; old and new bound Application within its own` },
  { operation: 'DELETE /proxies/{id}', permission: 'proxy:delete', who: `${MANAGEMENT}; the bound Application within its own` },
  { operation: 'ANY /proxy/{path}', permission: 'token:use', who: 'private key; on every token referenced; with SVC-PROXY-KEY and require_auth false, the proxy\'s Application' },
  { operation: 'GET /tenants/self', permission: 'tenant:read', who: MANAGEMENT },
  { operation: 'PATCH /tenants/self', permission: 'tenant:update', who: MANAGEMENT },
  { operation: 'GET /logs', permission: 'log:read', who: MANAGEMENT },
  { operation: 'GET /logs/export', permission: 'log:read', who: MANAGEMENT },
  { operation: 'GET /permissions', permission: null, who: 'any key' },
]

export interface PermissionListing extends PermissionInfo {
  /** Management Applications may hold token permissions only as a ceiling of what they grant. */
  ceiling_application_types: readonly string[]
  operations: readonly string[]
}

/** `GET /permissions`: every permission, who may hold it, and the operations that need it. Built once. */
export const permissionListing: readonly PermissionListing[] = permissions.map((p) => ({
  ...p,
  ceiling_application_types: p.type.startsWith('token:') ? ['management'] : [],
  operations: operations.filter((o) => o.permission === p.type).map((o) => o.operation),
}))
