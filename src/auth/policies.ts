import { AppError, ValidationError, type FieldErrors } from '../errors/index.js'
import type { AccessScope, ScopeMatch, TokenMark } from '../store/index.js'
import { decide, holdsPermission, implicitTransform, type AccessRule, type TokenScope, type Transform } from './access-rules.js'
import { grantExcess, transformRank, type Excess, type Grants } from './grants.js'
import { isTokenPermission, type Permission, type TokenPermission } from './permissions.js'
import type { Principal } from './principal.js'

/**
 * Every authorization decision of Tessera: "may this principal do this to this resource, and
 * with which transform". Routes, the proxy, Reactors and their bridges, search, detokenize and
 * the services that hand out grants all ask here, so there is one read decision, not one per
 * path. The decisions are written out as prose in the README ("Authorization").
 */

/** Management keys hold token permissions only as a ceiling for what they grant. */
const TOKEN_ACTORS: ReadonlySet<Principal['type']> = new Set(['private', 'public', 'session'])

/** Whether a principal may call an operation that needs `permission` at all (per token, the rules decide further). */
export function holds(principal: Principal, permission: Permission): boolean {
  if (!isTokenPermission(permission)) return holdsPermission(principal.rules, principal.permissions, permission)
  if (!TOKEN_ACTORS.has(principal.type) || !holdsPermission(principal.rules, principal.permissions, permission)) return false
  return principal.within === undefined || principal.within.every((grants) => holdsPermission(grants.rules, grants.permissions, permission))
}

/** 403 naming what is missing unless the principal holds `permission` (and, when given, is one of `types`). */
export function requireHeld(principal: Principal, permission: Permission, types?: readonly Principal['type'][]): void {
  if (types && !types.includes(principal.type)) {
    throw new AppError('forbidden', { detail: `This operation needs a ${types.join(' or ')} Application; the key is ${principal.type}.` })
  }
  if (holds(principal, permission)) return
  const ceilingOnly = isTokenPermission(permission) && !TOKEN_ACTORS.has(principal.type)
  const detail = ceilingOnly
    ? `A ${principal.type} key holds token permissions only as a ceiling for what it grants; ${permission} needs a private or public Application or a session.`
    : `The key lacks the ${permission} permission.`
  throw new AppError('forbidden', { detail })
}

/** Expiry is checked at every use, not only when a key authenticates (a Reactor's Application, a long call). */
export function assertActive(principal: Principal, now = Date.now()): void {
  if (principal.expiresAt !== null && principal.expiresAt.getTime() <= now) {
    throw new AppError('forbidden', { detail: `The ${principal.kind === 'session' ? 'session' : 'Application'} this acts as has expired.` })
  }
}

/**
 * The transform `permission` gets on this token, or undefined for no access. Bounded by every
 * grant the principal acts within (a session's authorizer, code's binder: the least revealing).
 */
export function tokenDecision(principal: Principal, permission: TokenPermission, token: TokenScope): Transform | undefined {
  assertActive(principal)
  if (!TOKEN_ACTORS.has(principal.type)) return undefined
  let transform = decideFor(principal, permission, token)
  for (const bound of principal.within ?? []) {
    if (transform === undefined) return undefined
    const decided = decideFor(bound, permission, token)
    transform = decided === undefined ? undefined : weaker(transform, decided)
  }
  return transform
}

/** The transform for `permission` on this token, or 403. */
export function authorizeToken(principal: Principal, permission: TokenPermission, token: TokenScope): Transform {
  const transform = tokenDecision(principal, permission, token)
  if (transform !== undefined) return transform
  // Refused by a bound, not by the key's own grants: say so, or the caller looks at the wrong key.
  const bounded = principal.within !== undefined && TOKEN_ACTORS.has(principal.type) && decideFor(principal, permission, token) !== undefined
  const detail = bounded
    ? `The key holds ${permission} on token ${token.id}, but not within the grants it acts within here (a session's authorizer's; the Application that last saved the Reactor or proxy the data goes to, or that bound its code).`
    : `The key lacks ${permission} on token ${token.id}.`
  throw new AppError('forbidden', { detail })
}

/**
 * A public key sits in a web page, so anyone holds it; a session's key is in the same page. The
 * ids of a tenant's tokens are one space: choosing one told such a caller whether a backend's id
 * exists (409), and took ids a backend would use later, which then held the caller's data.
 * Their tokens get ids Tessera chooses.
 */
export function refuseChosenId(principal: Principal, id: unknown): void {
  if (id !== undefined && (principal.type === 'public' || principal.type === 'session')) {
    throw new ValidationError({ id: ['cannot be chosen with a public or session key: Tessera chooses the ids of their tokens'] })
  }
}

/** Creating a token in, or adding or removing, a container needs `permission` on each container on its own. */
export function authorizeContainers(principal: Principal, permission: TokenPermission, id: string, containers: readonly string[]): void {
  for (const container of containers) {
    if (tokenDecision(principal, permission, { id, containers: [container] }) === undefined) {
      throw new AppError('forbidden', { detail: `The key lacks ${permission} on container ${container}.` })
    }
  }
}

/**
 * How `data` is shown in an answer about this token: never more revealing than the operation's
 * own decision, nor than each viewer's `token:read` decision (no read: redacted). A create,
 * update, search or tokenize answer so never shows a caller more than reading the token would.
 */
export function answerTransform(principal: Principal, permission: TokenPermission, token: TokenScope, viewers: readonly Principal[] = [principal]): Transform {
  let transform = tokenDecision(principal, permission, token) ?? 'redact'
  for (const viewer of viewers) transform = weaker(transform, tokenDecision(viewer, 'token:read', token) ?? 'redact')
  return transform
}

/**
 * Masks, fingerprint expressions and search indexes are views derived from the data: changing
 * them on an existing token needs the update shown with `reveal`, i.e. `reveal` for both
 * token:update and token:read on it.
 */
export function authorizeViewChange(principal: Principal, token: TokenScope, fields: readonly string[]): void {
  if (fields.length === 0 || answerTransform(principal, 'token:update', token) === 'reveal') return
  const errors: FieldErrors = Object.fromEntries(fields.map((f) => [f, ['changing it needs reveal for token:update and token:read on this token']]))
  throw new AppError('forbidden', { detail: `Changing ${fields.join(', ')} needs reveal on token ${token.id}.`, errors })
}

/**
 * The tokens `permission` reaches with at least `minimum`, as SQL scopes (ANDed). Exact: a rule
 * that decides with less shadows the later rules it matches before them.
 */
export function tokenScopes(principal: Principal, permission: TokenPermission, minimum: Transform = 'redact'): AccessScope[] {
  if (!TOKEN_ACTORS.has(principal.type)) return [{ rules: [] }]
  return [principal, ...(principal.within ?? [])].map((grants) => scopeOf(grants, permission, minimum))
}

/** What an equality test compares: the fingerprint (`fingerprint:` terms and filters, deduplication) or the search indexes (`data:` terms). */
export type EqualityTest = 'fingerprint' | 'search'

const TEST_MARKS: Record<EqualityTest, TokenMark> = { fingerprint: 'fingerprint_beyond_mask', search: 'search_beyond_mask' }

/**
 * The tokens on which `permission` may test the data for equality: a search's `data:` and
 * `fingerprint:` terms, a list's fingerprint filter, deduplication. Each answers "is this
 * token's value X?", as the fingerprint does, so it is allowed exactly where an answer would show
 * the fingerprint: the operation's decision and the caller's `token:read` both at least `mask`.
 * A token whose tested fingerprint or index reaches beyond its mask (marked when written) needs
 * both at `reveal`.
 */
export function equalityScopes(principal: Principal, permission: TokenPermission, tests: readonly EqualityTest[]): AccessScope[] {
  const permissions: TokenPermission[] = permission === 'token:read' ? [permission] : [permission, 'token:read']
  const marks = tests.map((test) => TEST_MARKS[test])
  return permissions.flatMap((p) => {
    const revealed = tokenScopes(principal, p, 'reveal')
    return tokenScopes(principal, p, 'mask').map((scope, i) => ({ ...scope, marked: { marks, rules: revealed[i]!.rules } }))
  })
}

/** Whether an answer shows a token's fingerprint: not under `redact`, and only under `reveal` when it tests beyond the mask. */
export function showsFingerprint(transform: Transform, token: { fingerprint_beyond_mask: boolean }): boolean {
  return transform === 'reveal' || (transform === 'mask' && !token.fingerprint_beyond_mask)
}

/**
 * What a move may not raise: the permissions that reach an existing token's data or existence.
 * `token:update` is needed on every container involved anyway, and `token:create` acts on no
 * existing token (deduplication also needs `token:read`, which is checked).
 */
const MOVE_BOUNDED: readonly TokenPermission[] = ['token:read', 'token:search', 'token:use', 'token:delete']

/**
 * Moving a token (adding or removing containers) needs `token:update` on every container
 * involved, and must not raise the caller's own decisions on it: a key that updates
 * everywhere but reads only `/general/` does not read a card by moving it there, nor by
 * dropping the container an earlier `redact` rule matched.
 */
export function authorizeMove(principal: Principal, current: TokenScope, next: TokenScope): void {
  authorizeContainers(principal, 'token:update', current.id, [...new Set([...current.containers, ...next.containers])])
  for (const permission of MOVE_BOUNDED) {
    const before = tokenDecision(principal, permission, current)
    const after = tokenDecision(principal, permission, next)
    if (after === undefined || (before !== undefined && transformRank(after) <= transformRank(before))) continue
    const had = before === undefined ? 'no access' : before
    throw new AppError('forbidden', {
      detail: `Moving token ${current.id} would raise the key's ${permission} on it from ${had} to ${after}; the key lacks ${permission} with ${after} where the token is now.`,
      errors: { containers: [`would raise your ${permission} on this token from ${had} to ${after}`] },
    })
  }
}

// --- proxy and Reactors -------------------------------------------------------------------

const NOTHING: Grants = { permissions: [], rules: [] }

/**
 * A caller's data bound for code or a destination someone else saved (a react's `args`, the
 * expressions a `require_auth` proxy detokenizes) goes only as far as that saver's current
 * grants reach too: a key that may only change the code or the destination must not receive,
 * through it, what the callers hold. `saver` null: saved before savers were kept (not bounded);
 * undefined (gone) or expired: nothing is detokenized.
 */
export function withinSaver(caller: Principal, saver: Principal | null | undefined, now = Date.now()): Principal {
  if (saver === null) return caller
  const active = saver !== undefined && (saver.expiresAt === null || saver.expiresAt.getTime() > now)
  const bound = active ? { permissions: saver.permissions, rules: saver.rules } : NOTHING
  return { ...caller, within: [...(caller.within ?? []), bound] }
}

/** The proxy is a token:use feature: checked even when the request holds no tokens. */
export function authorizeProxyCaller(principal: Principal): void {
  if (principal.type !== 'private' || !holdsPermission(principal.rules, principal.permissions, 'token:use')) {
    throw new AppError('forbidden', { detail: 'The proxy needs a private Application with the token:use permission.' })
  }
  if (!holds(principal, 'token:use')) {
    throw new AppError('forbidden', { detail: 'The Application that saved or bound this proxy (or its code) does not hold token:use (or is gone): save the proxy again with a key that does.' })
  }
}

/** `/proxy` with SVC-PROXY-URL: a private token:use caller, in a tenant that has not turned the ephemeral proxy off. */
export async function authorizeEphemeralProxy(principal: Principal, enabled: (tenantId: string) => Promise<boolean>): Promise<void> {
  authorizeProxyCaller(principal)
  if (!(await enabled(principal.tenantId))) throw new AppError('forbidden', { detail: 'The ephemeral proxy is disabled for this tenant.' })
}

const NO_SUCH_PROXY = 'The SVC-PROXY-KEY does not name a proxy of this tenant.'

/**
 * A SVC-PROXY-KEY that names no proxy: 401 on its own, 403 beside a valid SVC-API-KEY (that
 * caller is authenticated, its tenant has no such proxy, and another tenant's reads the same).
 */
export function unknownProxyKey(callerAuthenticated: boolean): AppError {
  if (!callerAuthenticated) return new AppError('unauthenticated', { detail: 'The SVC-PROXY-KEY is not valid.' })
  return new AppError('forbidden', { detail: NO_SUCH_PROXY })
}

/**
 * Who detokenizes for a pre-configured proxy: with `require_auth`, the caller (a private
 * token:use Application of the proxy's tenant); without, the proxy's own Application, which
 * its creator could only bind if it held at least as much (see `authorizeBinding`).
 */
export function preconfiguredProxyPrincipal(proxy: { tenant_id: string; require_auth: boolean }, actor: Principal | undefined, caller: Principal | undefined, now = Date.now()): Principal {
  const principal = proxy.require_auth ? caller : actingApplication(actor, 'proxy', now)
  if (principal === undefined) throw new AppError('unauthenticated', { detail: 'The SVC-API-KEY header is required.' })
  if (principal.tenantId !== proxy.tenant_id) throw new AppError('forbidden', { detail: NO_SUCH_PROXY })
  authorizeProxyCaller(principal)
  return principal
}

/** The Application a Reactor or a proxy's code acts as: there, and not expired, at each use. */
export function actingApplication(actor: Principal | undefined, what: 'Reactor' | 'proxy', now = Date.now()): Principal {
  if (actor === undefined) throw new AppError('forbidden', { detail: `The ${what} has no Application to act as.` })
  assertActive(actor, now)
  return actor
}

// --- handing out grants -------------------------------------------------------------------

/** A browser or app (public key) creates a session; a backend (private key) authorizes it, within its own grants. */
export function authorizeSessionStep(principal: Principal, step: 'create' | 'authorize'): void {
  const type = step === 'create' ? 'public' : 'private'
  if (principal.type !== type) throw new AppError('forbidden', { detail: `Sessions are ${step}d with a ${type} Application key.` })
}

/**
 * 403 naming each part of `grant` that reaches further than `grantor` holds (see
 * `grantExcess`). Used by every path that hands out grants: creating and updating
 * Applications, authorizing sessions, binding Applications to proxies and Reactors.
 */
export function authorizeGrant(grantor: Grants, grant: Grants, context: { what: string; field?: string }): void {
  const excess = grantExcess(grant, grantor)
  if (excess.length === 0) return
  throw new AppError('forbidden', { detail: `${context.what} reaches further than the key's own grants: ${excess[0]!.detail}.`, errors: excessErrors(excess, context.field) })
}

/**
 * Changing, regenerating or deleting an Application needs its grants (before and after) within
 * the caller's, so a narrow key cannot take over or disable a wider one; and no Application
 * changes its own grants.
 */
export function authorizeApplicationChange(caller: Principal, target: Grants & { id: string }, next?: Grants): void {
  if (next !== undefined && target.id === caller.id && !equivalent(target, next)) {
    throw new AppError('forbidden', { detail: 'An Application may not change its own grants.' })
  }
  authorizeGrant(caller, target, { what: 'The Application', field: 'id' })
  if (next !== undefined) authorizeGrant(caller, next, { what: 'The new grant' })
}

/**
 * A key that expires never hands out access that outlives it: an Application it creates, or a
 * key it mints for one, must expire no later than the key itself (as a session already does).
 */
export function authorizeLifetime(caller: Principal, expiresAt: Date | null, context: { what: string; field: string }): void {
  const limit = caller.expiresAt
  if (limit === null || (expiresAt !== null && expiresAt.getTime() <= limit.getTime())) return
  const detail = `${context.what} would outlive the key, which expires at ${limit.toISOString()}.`
  throw new AppError('forbidden', { detail, errors: { [context.field]: [`must expire no later than ${limit.toISOString()}`] } })
}

/** Whether `after` reaches less far than `before` anywhere (it lost a permission, a container, a transform). */
export function narrows(before: Grants, after: Grants): boolean {
  return grantExcess(before, after).length > 0
}

/** Binding an Application to a proxy or Reactor hands its grants to the code and (require_auth false) to the key holder. */
export function authorizeBinding(caller: Principal, app: Grants | undefined, field = 'application.id'): void {
  if (app !== undefined) authorizeGrant(caller, app, { what: 'The bound Application', field })
}

// --- helpers ------------------------------------------------------------------------------

function decideFor(grants: Grants, permission: TokenPermission, token: TokenScope): Transform | undefined {
  const decision = decide(grants.rules as AccessRule[], grants.permissions, permission, token)
  return decision.allowed ? decision.transform : undefined
}

function weaker(a: Transform, b: Transform): Transform {
  return transformRank(a) <= transformRank(b) ? a : b
}

function scopeOf(grants: Grants, permission: TokenPermission, minimum: Transform): AccessScope {
  const granted = (transform: Transform) => transformRank(transform) >= transformRank(minimum)
  const rules: AccessScope['rules'] = grants.rules
    .filter((r) => r.permissions.includes(permission))
    .sort((a, b) => a.priority - b.priority)
    .map((r) => ({ match: matchOf(r), granted: granted(r.transform) }))
  if (grants.permissions.includes(permission)) rules.push({ match: {}, granted: granted(implicitTransform(permission)) })
  return { rules }
}

function matchOf(rule: AccessRule): ScopeMatch {
  if (rule.container !== undefined) return { container: rule.container }
  return rule.conditions?.length ? { conditions: rule.conditions } : {}
}

function excessErrors(excess: readonly Excess[], field?: string): FieldErrors {
  const errors: FieldErrors = {}
  for (const e of excess) (errors[field ?? e.field] ??= []).push(e.detail)
  return errors
}

/** Each within the other: the same reach, however the rules are written. */
function equivalent(a: Grants, b: Grants): boolean {
  return grantExcess(a, b).length === 0 && grantExcess(b, a).length === 0
}
