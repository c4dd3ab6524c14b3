import type { Middleware } from 'koa'
import { ValidationError } from '../../errors/index.js'
import type { AppState } from '../context.js'
import { unsafeTextReason } from '../schemas/unsafe-text.js'

/**
 * Path parameters and query values reach the database as text too (token ids, filters): a NUL or
 * a lone surrogate there is a 400 naming the parameter, before any route runs. Not for `/proxy`,
 * which forwards its path and query untouched.
 */
export function textGuard(): Middleware<AppState> {
  return async (ctx, next) => {
    if (ctx.path.includes('%')) {
      const reason = unsafeTextReason(decodeLoosely(ctx.path))
      if (reason !== undefined) throw ValidationError.field('path', reason)
    }
    if (ctx.querystring !== '') checkQuery(ctx.query)
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

/** A path that does not decode is left to the router (which leaves such parameters encoded). */
function decodeLoosely(path: string): string {
  try {
    return decodeURIComponent(path)
  } catch {
    return path
  }
}
