import type { Middleware } from 'koa'
import type { Authenticator } from '../../auth/authenticator.js'
import type { AppState } from '../context.js'
import type { BodyBudget } from '../body-budget.js'
import { jsonBody } from '../middleware/json-body.js'
import { reauthenticate } from '../middleware/authenticate.js'

/** The body parsers routes pick from, built once with the configured limits. */
export interface BodyParsers {
  json: Middleware<AppState>
  optionalJson: Middleware<AppState>
  mergePatch: Middleware<AppState>
  /** `POST /reactors/:id/react`: up to the Reactor payload limit. */
  payload: Middleware<AppState>
}

export interface BodyLimits {
  bodyBytes: number
  payloadBytes: number
  /** Most JSON values in one body, the react route's included (SVC_BODY_MAX_JSON_VALUES). */
  jsonValues: number
  budget: BodyBudget
}

/** Each parser checks the caller's key again once the body is in (see `reauthenticate`). */
export function bodyParsers(limits: BodyLimits, authenticator: Authenticator): BodyParsers {
  const recheck = reauthenticate(authenticator)
  const then = (parse: Middleware<AppState>): Middleware<AppState> => (ctx, next) => parse(ctx, () => recheck(ctx, next))
  const limitBytes = limits.bodyBytes
  const { jsonValues: maxValues, budget } = limits
  return {
    json: then(jsonBody({ limitBytes, maxValues, budget })),
    optionalJson: then(jsonBody({ limitBytes, maxValues, budget, optional: true })),
    // RFC 7396 names its own media type; a plain JSON body would not say that null means "remove".
    mergePatch: then(jsonBody({ limitBytes, maxValues, budget, contentTypes: ['application/merge-patch+json'] })),
    // The args are parsed again inside a Reactor's isolate: the same bound keeps them small there.
    payload: then(jsonBody({ limitBytes: limits.payloadBytes, maxValues, budget })),
  }
}
