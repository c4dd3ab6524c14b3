import { randomUUID } from 'node:crypto'
import type { Middleware } from 'koa'
import type { AppState } from '../context.js'

const TRACE_HEADER = 'svc-trace-id'
const SAFE_TRACE_ID = /^[A-Za-z0-9._:-]{1,128}$/

/** Echoes a caller's SVC-TRACE-ID when it is safe to log, otherwise makes one. */
export function requestId(): Middleware<AppState> {
  return async (ctx, next) => {
    const given = ctx.get(TRACE_HEADER)
    ctx.state.traceId = SAFE_TRACE_ID.test(given) ? given : randomUUID()
    ctx.set('SVC-Trace-Id', ctx.state.traceId)
    await next()
  }
}
