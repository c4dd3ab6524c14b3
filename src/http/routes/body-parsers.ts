import type { Middleware } from 'koa'
import type { AppState } from '../context.js'
import { jsonBody } from '../middleware/json-body.js'

/** The body parsers routes pick from, built once with the configured limit. */
export interface BodyParsers {
  json: Middleware<AppState>
  optionalJson: Middleware<AppState>
  mergePatch: Middleware<AppState>
}

export function bodyParsers(limitBytes: number): BodyParsers {
  return {
    json: jsonBody({ limitBytes }),
    optionalJson: jsonBody({ limitBytes, optional: true }),
    // RFC 7396 names its own media type; a plain JSON body would not say that null means "remove".
    mergePatch: jsonBody({ limitBytes, contentTypes: ['application/merge-patch+json'] }),
  }
}
