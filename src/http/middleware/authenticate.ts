import type { Middleware } from 'koa'
import type { Authenticator } from '../../auth/authenticator.js'
import type { Permission } from '../../auth/permissions.js'
import { requireHeld } from '../../auth/policies.js'
import type { Principal } from '../../auth/principal.js'
import { AppError } from '../../errors/index.js'
import type { AppState } from '../context.js'

/** Resolves SVC-API-KEY to a principal on `ctx.state.principal` (401 otherwise). */
export function authenticate(authenticator: Authenticator): Middleware<AppState> {
  return async (ctx, next) => {
    ctx.state.principal = await authenticator.authenticate(ctx.get('svc-api-key') || undefined)
    await next()
  }
}

/** 403 unless the principal holds `permission` (and, when given, is one of `types`); see auth/policies.ts. */
export function requirePermission(permission: Permission, types?: readonly Principal['type'][]): Middleware<AppState> {
  return async (ctx, next) => {
    ctx.state.permission = permission
    requireHeld(currentPrincipal(ctx.state), permission, types)
    await next()
  }
}

export function currentPrincipal(state: AppState): Principal {
  if (!state.principal) throw new AppError('unauthenticated')
  return state.principal
}
