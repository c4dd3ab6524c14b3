import type { Middleware } from 'koa'
import type { Logger } from 'pino'
import type { AppState } from '../context.js'
import type { Drain } from '../drain.js'

/**
 * One line per request when its response closes: method, route path, status, duration. Never
 * headers, query or bodies. A response that closed before it was complete says why, so a
 * request cut at shutdown is not mistaken for an answer.
 */
export function accessLog(logger: Logger, drain: Drain): Middleware<AppState> {
  return async (ctx, next) => {
    if (!logger.isLevelEnabled('info')) return next()
    const start = process.hrtime.bigint()
    const res = ctx.res
    res.once('close', () => {
      const ms = Math.round(Number(process.hrtime.bigint() - start) / 1e4) / 100
      const line: Record<string, unknown> = { traceId: ctx.state.traceId, method: ctx.method, path: ctx.path, status: res.headersSent ? res.statusCode : null, ms }
      if (!res.writableFinished) line.incomplete = drain.cut ? 'cut at the shutdown deadline' : 'connection closed before the answer was complete'
      if (drain.draining) line.shutdown = drain.cut ? 'aborted at the deadline' : 'draining'
      logger.info(line, 'request')
    })
    return next()
  }
}
