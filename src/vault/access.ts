import { decide, type AccessRule, type Transform } from '../auth/access-rules.js'
import type { Principal } from '../auth/principal.js'
import { AppError } from '../errors/index.js'
import type { AccessScope } from '../store/index.js'

/** The transform `permission` gets on this token, or 403. */
export function authorizeToken(principal: Principal, permission: string, token: { id: string; containers: readonly string[] }): Transform {
  const decision = decide(principal.rules as AccessRule[], principal.permissions, permission, token)
  if (!decision.allowed) throw new AppError('forbidden', { detail: `The key lacks ${permission} on token ${token.id}.` })
  return decision.transform
}

/**
 * The caller's grants for `permission` as a SQL-able scope, so lists and searches count and page
 * only tokens the caller may see. Exactness per row is still decided by `authorizeToken`.
 */
export function accessScope(principal: Principal, permission: string): AccessScope {
  const scope: AccessScope = { all: principal.permissions.includes(permission), containerPrefixes: [], conditionSets: [] }
  for (const rule of principal.rules) {
    if (!rule.permissions.includes(permission)) continue
    if (rule.container !== undefined) scope.containerPrefixes.push(rule.container)
    else if (rule.conditions?.length) scope.conditionSets.push(rule.conditions)
    else scope.all = true
  }
  return scope
}
