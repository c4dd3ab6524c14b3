import type { IncomingMessage } from 'node:http'
import type { Middleware } from 'koa'
import sjson from 'secure-json-parse'
import { AppError, ValidationError } from '../../errors/index.js'
import { depthExceeds, inexactIntegerAt, textDepthExceeds } from '../../shapes/json-depth.js'
import { findUnsafeText, jsonTextMayBeUnsafe } from '../../shapes/unsafe-text.js'
import type { AppState } from '../context.js'
import { contentCoding } from '../../egress/headers.js'
import type { BodyBudget } from '../body-budget.js'
import { readRequestBody } from '../body-reader.js'
import { jsonValuesExceed, tooManyValues } from '../json-values.js'

const MAX_DEPTH = 64
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false })

export interface JsonBodyOptions {
  limitBytes: number
  /** Content types accepted; others are 415. Unset: any (a non-JSON body is still a 400). */
  contentTypes?: string[]
  /** Whether an empty body is allowed (parsed as undefined). */
  optional?: boolean
  /** Most JSON values the body may hold (400 above). */
  maxValues: number
  /** The app's budget of body bytes being received at once (503 past it). */
  budget: BodyBudget
}

/**
 * Strict JSON parsing for API routes: limit before buffering (413), valid UTF-8, no
 * `__proto__`/`constructor` keys, bounded nesting, no trailing garbage, no string that cannot be
 * stored (NUL, lone surrogates: 400 naming the field), at most `maxValues` JSON values (counted
 * before parsing). The parsed value is left on `ctx.state.body`.
 */
export function jsonBody(options: JsonBodyOptions): Middleware<AppState> {
  return async (ctx, next) => {
    if (options.contentTypes && ctx.request.length !== 0 && !ctx.is(options.contentTypes)) {
      throw new AppError('unsupported_media_type', { detail: `Content-Type must be one of: ${options.contentTypes.join(', ')}.` })
    }
    const raw = ctx.state.rawBody ?? (await readRaw(ctx.req, options.limitBytes, options.budget))
    if (raw.length > options.limitBytes) throw new AppError('payload_too_large', { detail: `The body exceeds ${options.limitBytes} bytes.` })
    if (raw.length === 0) {
      if (!options.optional) throw new AppError('bad_request', { detail: 'A JSON request body is required.' })
      ctx.state.body = undefined
    } else {
      ctx.state.body = parseStrictJson(raw, options.maxValues)
    }
    await next()
  }
}

/**
 * The request body, at most `limitBytes`. Node takes only the chunked framing off, and nothing
 * here inflates, so a transfer coding other than chunked, or a Content-Encoding unless the
 * caller forwards the bytes as they are (`coded: 'forwarded'`, the proxy), is 415: read as it
 * is, a gzip body would be parsed (or its expressions looked for) in compressed bytes. Its bytes
 * count against the process's budget of bodies being received (`budget`, 503 past it).
 */
export async function readRaw(
  req: IncomingMessage,
  limitBytes: number,
  budget: BodyBudget,
  options: { coded?: 'refused' | 'forwarded'; heldUntil?: Promise<unknown> } = {},
): Promise<Buffer> {
  const coded = options.coded ?? 'refused'
  const transfer = req.headers['transfer-encoding']
  if (transfer !== undefined && transfer.split(',').some((coding) => coding.trim().toLowerCase() !== 'chunked')) {
    throw new AppError('unsupported_media_type', { detail: 'Transfer-Encoding other than chunked is not supported: send the body uncompressed.' })
  }
  if (coded === 'refused' && contentCoding(req.headers['content-encoding']) !== undefined) {
    throw new AppError('unsupported_media_type', { detail: 'Content-Encoding is not supported on this route: send the body uncompressed.' })
  }
  return readRequestBody(req, { limitBytes, budget, heldUntil: options.heldUntil })
}

/** `maxValues` unset: no bound on the values (jsonBody always sets one). */
export function parseStrictJson(raw: Buffer, maxValues?: number): unknown {
  // Before decoding and parsing, which is where the memory and the time go.
  if (maxValues !== undefined && jsonValuesExceed(raw, maxValues)) throw tooManyValues(maxValues)
  let text: string
  try {
    text = utf8.decode(raw)
  } catch (err) {
    throw new AppError('bad_request', { detail: 'The body is not valid UTF-8.', cause: err })
  }
  let value: unknown
  try {
    value = sjson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' })
  } catch (err) {
    // V8's messages quote the input, which may be sensitive: keep only the position. A forbidden
    // key is a SyntaxError of secure-json-parse's own, whose message quotes nothing.
    const forbidden = err instanceof SyntaxError && err.message === 'Object contains forbidden prototype property'
    const position = err instanceof SyntaxError ? /position (\d+)/.exec(err.message)?.[1] : undefined
    const reason = forbidden ? 'forbidden key __proto__ or constructor.prototype' : `syntax error${position ? ` at position ${position}` : ''}`
    throw new AppError('bad_request', { detail: `The body is not valid JSON (${reason}).`, cause: err })
  }
  // The text is scanned first (no allocation); the value decides, since of a repeated key only
  // the last value is kept, so {"a":[[…]],"a":0} is as shallow as {"a":0}.
  if (textDepthExceeds(text, MAX_DEPTH) && depthExceeds(value, MAX_DEPTH)) throw new AppError('bad_request', { detail: `JSON nesting deeper than ${MAX_DEPTH} levels.` })
  // Stored as parsed, it would be another number (12345678901234567891 read back as ...7000).
  const inexact = inexactIntegerAt(text)
  if (inexact !== undefined) throw ValidationError.field('body', `the integer at position ${inexact} has more digits than a number holds exactly; send it as a string`)
  // Most bodies have no escape or number literal that could parse to an unsafe value: no walk.
  const unsafe = jsonTextMayBeUnsafe(text) ? findUnsafeText(value) : undefined
  if (unsafe !== undefined) throw new ValidationError(unsafe)
  return value
}
