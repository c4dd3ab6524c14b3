import type { Context } from 'koa'

/**
 * Any JSON value as a 200 answer (`/tokenize`, `/detokenize` and their replays take any JSON):
 * Koa sends an object as JSON by itself, but a string as `text/plain` without quotes and `null`
 * as an empty 204.
 */
export function answerJson(ctx: Context, value: unknown): void {
  if (value !== null && typeof value === 'object') {
    ctx.body = value
    return
  }
  ctx.status = 200
  ctx.type = 'application/json'
  ctx.body = JSON.stringify(value)
}
