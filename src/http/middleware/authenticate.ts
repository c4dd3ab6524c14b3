import type { Middleware } from 'koa'
import type { Authenticator } from '../../auth/authenticator.js'
import type { Principal } from '../../auth/principal.js'
import { AppError } from '../../errors/index.js'
import type { ApplicationType } from '../../store/index.js'
import type { AppState } from '../context.js'

/** Resolves SVC-API-KEY to a principal on `ctx.state.principal` (401 otherwise). */
export function authenticate(authenticator: Authenticator): Middleware<AppState> {
  return async (ctx, next) => {
    ctx.state.principal = await authenticator.authenticate(ctx.get('svc-api-key') || undefined)
    await next()
  }
}

/** Every permission a principal holds for non-token operations: its own plus those its rules grant. */
export function holds(principal: Principal, permission: string): boolean {
  return principal.permissions.includes(permission) || principal.rules.some((r) => r.permissions.includes(permission))
}

/** 403 unless the principal holds `permission` (and, when given, is one of `types`). */
export function requirePermission(permission: string, types?: ApplicationType[]): Middleware<AppState> {
  return async (ctx, next) => {
    const principal = currentPrincipal(ctx.state)
    if (types && !types.includes(principal.type as ApplicationType)) {
      throw new AppError('forbidden', { detail: `This operation needs a ${types.join(' or ')} Application.` })
    }
    if (!holds(principal, permission)) throw new AppError('forbidden', { detail: `The key lacks the ${permission} permission.` })
    await next()
  }
}

export function currentPrincipal(state: AppState): Principal {
  if (!state.principal) throw new AppError('unauthenticated')
  return state.principal
}
