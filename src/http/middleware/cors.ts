import koaCors from '@koa/cors'
import type { Middleware } from 'koa'
import { ANY_ORIGIN } from '../../config/cors-origins.js'
import type { AppState } from '../context.js'

/**
 * Tessera's own answer headers a page may read (besides the safelisted ones). `*` covers every
 * other header, a proxied destination's too, in browsers that know the wildcard; it holds for
 * requests without credentials, and Tessera never allows credentials: keys travel in
 * `SVC-API-KEY`, never in cookies, so a page can only send a key it was given.
 */
const EXPOSED = ['*', 'SVC-Trace-Id', 'SVC-Idempotent-Replayed', 'SVC-PROXY-DESTINATION-STATUS', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'Retry-After', 'Location', 'Allow']

/** Browsers cache a preflight's answer this long (Chromium caps it at 2 h). */
const PREFLIGHT_MAX_AGE_SECONDS = 600

/**
 * Cross-origin answers for browser pages of the allowed origins (SPEC 2.2: public Applications
 * collect data in browser applications). A preflight is answered here, before the rate limiter
 * and authentication (it carries no key); every other answer of an allowed origin, problems and
 * 429s included, carries `Access-Control-Allow-Origin`. An origin not allowed gets no CORS
 * header, so its page cannot read the answer. No origins: a pass-through, answers unchanged.
 */
export function cors(origins: readonly string[]): Middleware<AppState> {
  if (origins.length === 0) return (_ctx, next) => next()
  const any = origins.includes(ANY_ORIGIN)
  const allowed = new Set(origins)
  return koaCors({
    origin: (ctx) => {
      const origin = ctx.get('Origin')
      return origin !== '' && (any || allowed.has(origin)) ? origin : ''
    },
    exposeHeaders: EXPOSED,
    maxAge: PREFLIGHT_MAX_AGE_SECONDS,
    credentials: false,
  })
}
