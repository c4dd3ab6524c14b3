import type { Middleware } from 'koa'
import type { Logger } from 'pino'
import { AppError, ValidationError } from '../../errors/index.js'
import type { IdempotencyService } from '../../idempotency/service.js'
import { isUncertainWrite } from '../../store/unavailable.js'
import type { AppState } from '../context.js'
import { replayPolicy, storedAnswer } from '../idempotency-replay.js'
import { answerJson } from '../json-answer.js'
import type { Authenticator } from '../../auth/authenticator.js'
import { authenticateAgain, currentPrincipal, requireRoutePermission } from './authenticate.js'
import { readRaw } from './json-body.js'
import type { BodyBudget } from '../body-budget.js'

export const IDEMPOTENCY_HEADER = 'SVC-IDEMPOTENCY-KEY'
const METHODS = new Set(['POST', 'PUT', 'PATCH'])
const VALID_KEY = /^[\x21-\x7e]{1,255}$/

/**
 * SVC-IDEMPOTENCY-KEY on POST, PUT and PATCH of the authenticated API (the proxy is outside).
 * The body is read here, before any route, because the request's fingerprint must be known
 * before it runs; the route's body parser takes it from `ctx.state.rawBody`. Only answers the
 * route produced are stored: a request that fails gives its key up, so a retry runs afresh,
 * unless its change stands (see below).
 */
export function idempotency(service: IdempotencyService, bodyLimitBytes: number, budget: BodyBudget, logger: Logger, authenticator: Authenticator): Middleware<AppState> {
  return async (ctx, next) => {
    const key = ctx.get(IDEMPOTENCY_HEADER)
    if (key === '' || !METHODS.has(ctx.method)) return next()
    const policy = replayPolicy(ctx.path)
    if (policy === 'skip') return next()
    if (!VALID_KEY.test(key)) throw ValidationError.field(IDEMPOTENCY_HEADER, 'must be 1 to 255 visible ASCII characters')
    // The route's permission check runs here, before anything is claimed or replayed, and
    // again on the key as resolved once the body is in (`authenticateAgain`): a caller that has
    // lost the permission gets the 403 a fresh request gets, not the answer it once had.
    requireRoutePermission(ctx)
    const raw = (ctx.state.rawBody = await readRaw(ctx.req, bodyLimitBytes, budget))
    await authenticateAgain(ctx, authenticator)
    const principal = currentPrincipal(ctx.state)
    const fingerprint = service.fingerprint(principal.id, ctx.method, ctx.path, ctx.querystring, raw)
    const start = await service.begin(principal.tenantId, key, fingerprint)
    if (start.kind === 'replay') {
      ctx.status = start.status
      if (start.body !== undefined) answerJson(ctx, start.body)
      ctx.set('SVC-Idempotent-Replayed', 'true')
      return
    }
    try {
      await next()
    } catch (err) {
      // A change that stands (or may: its commit went unanswered) keeps its key: a retry would
      // make it twice. It is kept as withheld, so a repeat is 409 naming the status it got.
      const settled = isUncertainWrite(err) || ctx.state.changed === true
        ? start.complete({ status: err instanceof AppError ? err.status : 500, body: null, withheld: true })
        : start.release()
      await settled.catch((cause: unknown) => logger.warn({ err: cause, traceId: ctx.state.traceId }, 'idempotency key not settled; it frees itself when its lease ends'))
      throw err
    }
    // The operation happened: its answer goes out even if it cannot be stored.
    await start.complete(storedAnswer(ctx.status, ctx.body, policy, ctx.response.is('json') === 'json')).catch((cause: unknown) =>
      logger.error({ err: cause, traceId: ctx.state.traceId }, 'idempotent answer not stored; a retry after the lease runs the request again'),
    )
  }
}

