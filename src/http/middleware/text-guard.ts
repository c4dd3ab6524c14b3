import type { Middleware } from 'koa'
import { ValidationError } from '../../errors/index.js'
import type { AppState } from '../context.js'
import { unsafeTextReason } from '../../shapes/unsafe-text.js'

const MALFORMED = 'is not valid percent-encoded UTF-8'

/**
 * Path parameters and query values reach the database as text too (token ids, filters): a NUL,
 * a lone surrogate or a percent-encoding that does not decode to UTF-8 is a 400 naming the
 * parameter, before any route runs. Left alone, the router kept a malformed path parameter
 * encoded (a 404 for an id that was never valid) and the query parser replaced bad bytes with
 * U+FFFD (a filter on a value the caller never sent). Not for `/proxy`, which forwards its path
 * and query untouched.
 */
export function textGuard(): Middleware<AppState> {
  return async (ctx, next) => {
    if (ctx.path.includes('%')) {
      const reason = unsafeTextReason(decodeOrRefuse(ctx.path, 'path'))
      if (reason !== undefined) throw ValidationError.field('path', reason)
    }
    if (ctx.querystring !== '') {
      checkEncoding(ctx.querystring)
      checkQuery(ctx.query)
    }
    await next()
  }
}

function checkQuery(query: Record<string, string | string[] | undefined>): void {
  for (const [name, value] of Object.entries(query)) {
    const nameReason = unsafeTextReason(name)
    if (nameReason !== undefined) throw ValidationError.field('query', `has a parameter name that ${nameReason.replace('must not contain', 'contains')}`)
    for (const item of [value ?? ''].flat()) {
      const reason = unsafeTextReason(item)
      if (reason !== undefined) throw ValidationError.field(name, reason)
    }
  }
}

/** Every `name=value` pair of the raw query must decode strictly; the error names the parameter when its name does. */
function checkEncoding(raw: string): void {
  if (!raw.includes('%')) return
  for (const pair of raw.split('&')) {
    if (!pair.includes('%')) continue
    const at = pair.indexOf('=')
    const name = decodeOrRefuse((at === -1 ? pair : pair.slice(0, at)).replaceAll('+', ' '), 'query')
    if (at !== -1) decodeOrRefuse(pair.slice(at + 1), name === '' ? 'query' : name)
  }
}

function decodeOrRefuse(text: string, field: string): string {
  try {
    return decodeURIComponent(text)
  } catch {
    throw ValidationError.field(field, MALFORMED)
  }
}
