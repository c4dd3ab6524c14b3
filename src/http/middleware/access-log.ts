import type { Middleware } from 'koa'
import type { Logger } from 'pino'
import type { AppState } from '../context.js'

/** One line per request: method, route path, status, duration. Never headers, query or bodies. */
export function accessLog(logger: Logger): Middleware<AppState> {
  return async (ctx, next) => {
    const start = process.hrtime.bigint()
    try {
      await next()
    } finally {
      if (logger.isLevelEnabled('info')) {
        const ms = Number(process.hrtime.bigint() - start) / 1e6
        logger.info({ traceId: ctx.state.traceId, method: ctx.method, path: ctx.path, status: ctx.status, ms: Math.round(ms * 100) / 100 }, 'request')
      }
    }
  }
}
