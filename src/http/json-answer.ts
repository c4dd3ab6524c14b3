import type { Context } from 'koa'

/**
 * Any JSON value as the answer (`/tokenize`, `/detokenize` and their replays take any JSON):
 * Koa sends an object as JSON by itself, but a string as `text/plain` without quotes and `null`
 * as an empty 204. The status is Koa's (200) unless the route (a replay) set one.
 */
export function answerJson(ctx: Context, value: unknown): void {
  if (value !== null && typeof value === 'object') {
    ctx.body = value
    return
  }
  ctx.type = 'application/json'
  ctx.body = JSON.stringify(value)
}
