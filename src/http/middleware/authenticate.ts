import type { Middleware, ParameterizedContext } from 'koa'
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

/** What each `requirePermission` middleware checks, by the middleware: see `requireRoutePermission`. */
const routeChecks = new WeakMap<object, (state: AppState) => void>()

/** 403 unless the principal holds `permission` (and, when given, is one of `types`); see auth/policies.ts. */
export function requirePermission(permission: Permission, types?: readonly Principal['type'][]): Middleware<AppState> {
  const requirement = (principal: Principal) => requireHeld(principal, permission, types)
  const check = (state: AppState) => {
    state.permission = permission
    state.requirement = requirement
    requirement(currentPrincipal(state))
  }
  const middleware: Middleware<AppState> = async (ctx, next) => {
    check(ctx.state)
    await next()
  }
  routeChecks.set(middleware, check)
  return middleware
}

/** A layer @koa/router leaves on `ctx.matched` (see matched-route.ts). */
interface RouteLayer {
  methods: readonly string[]
  stack: readonly object[]
}

/**
 * The `requirePermission` of the route that will answer, run by a stage before it (idempotency):
 * a stored answer must not go to a caller a fresh request would refuse. The route is the first
 * layer matching path and method, as in matched-route.ts; a route without the check sets nothing.
 */
export function requireRoutePermission(ctx: ParameterizedContext<AppState>): void {
  const layers = Array.isArray(ctx.matched) ? (ctx.matched as RouteLayer[]) : []
  const route = layers.find((layer) => layer.methods.includes(ctx.method))
  for (const middleware of route?.stack ?? []) routeChecks.get(middleware)?.(ctx.state)
}

/**
 * A key is checked when the headers arrive, but its body may follow up to the request time-out
 * (120 s) later: a key revoked, or an Application narrowed, meanwhile must not act on a body
 * chosen after the change. Once the body is in, the key is resolved again (a cache hit when
 * nothing changed) and the route's permission check runs on what it resolves to now.
 */
export function reauthenticate(authenticator: Authenticator): Middleware<AppState> {
  return async (ctx, next) => {
    await authenticateAgain(ctx, authenticator)
    await next()
  }
}

/**
 * The check of `reauthenticate`, for every stage that reads a body (the body parsers, and the
 * idempotency stage, which reads it before routes that have none: a key minted or a session
 * made by a route after it must not rest on a key revoked while the body was on its way).
 */
export async function authenticateAgain(ctx: ParameterizedContext<AppState>, authenticator: Authenticator): Promise<void> {
  if (ctx.state.principal === undefined) return
  ctx.state.principal = await authenticator.again(ctx.state.principal)
  ctx.state.requirement?.(ctx.state.principal)
}

export function currentPrincipal(state: AppState): Principal {
  if (!state.principal) throw new AppError('unauthenticated')
  return state.principal
}
