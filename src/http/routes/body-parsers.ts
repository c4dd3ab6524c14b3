import type { Middleware } from 'koa'
import type { Authenticator } from '../../auth/authenticator.js'
import type { AppState } from '../context.js'
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

/** Each parser checks the caller's key again once the body is in (see `reauthenticate`). */
export function bodyParsers(limits: { bodyBytes: number; payloadBytes: number }, authenticator: Authenticator): BodyParsers {
  const recheck = reauthenticate(authenticator)
  const then = (parse: Middleware<AppState>): Middleware<AppState> => (ctx, next) => parse(ctx, () => recheck(ctx, next))
  const limitBytes = limits.bodyBytes
  return {
    json: then(jsonBody({ limitBytes })),
    optionalJson: then(jsonBody({ limitBytes, optional: true })),
    // RFC 7396 names its own media type; a plain JSON body would not say that null means "remove".
    mergePatch: then(jsonBody({ limitBytes, contentTypes: ['application/merge-patch+json'] })),
    payload: then(jsonBody({ limitBytes: limits.payloadBytes })),
  }
}
