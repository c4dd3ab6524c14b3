import { headerValueText, isAnswerStatus, isHeaderName, isHeaderValue, isRecord } from '../../../shapes/http-parts.js'
import { textDepthExceeds } from '../../../shapes/json-depth.js'
import type { RunErrorCode, WireOutcome } from '../shared/protocol.js'

/**
 * Deeper results pass the sandbox's JSON.stringify but overflowed the API process's stack where
 * it handles them (serializing the answer, walking a `tokenize`): a plain-text 500.
 */
export const RESULT_MAX_DEPTH = 512

/**
 * Turns what the sandbox's `run` returned ([meta JSON, value JSON]) into a WireOutcome.
 * The pair is produced by code the Reactor could have tampered with (it shares the context),
 * so every field is checked here, on the host side of the boundary.
 */
export function decodeRun(result: unknown, payloadMaxBytes: number): WireOutcome {
  if (!Array.isArray(result) || typeof result[0] !== 'string' || typeof result[1] !== 'string') {
    return failure('The Reactor runtime received a malformed result.')
  }
  const [metaJson, json] = result as [string, string]
  if (Buffer.byteLength(metaJson) + Buffer.byteLength(json) > payloadMaxBytes) return tooLarge(payloadMaxBytes)
  // Each level costs at least one character: short results need no scan.
  if (json.length > RESULT_MAX_DEPTH && textDepthExceeds(json, RESULT_MAX_DEPTH)) {
    return failure(`The Reactor result is nested more than ${RESULT_MAX_DEPTH} levels deep.`)
  }
  let meta: unknown
  try {
    meta = JSON.parse(metaJson)
  } catch {
    return failure('The Reactor runtime received a malformed result.')
  }
  if (!isRecord(meta)) return failure('The Reactor runtime received a malformed result.')
  switch (meta.kind) {
    case 'ok':
      return { kind: 'ok', json }
    case 'too_large':
      return tooLarge(payloadMaxBytes)
    case 'response':
      return decodeResponse(meta, json)
    case 'error':
      return decodeError(meta)
    default:
      return failure('The Reactor runtime received a malformed result.')
  }
}

const REACTOR_CODES: readonly RunErrorCode[] = ['bad_request', 'unauthenticated', 'forbidden', 'reactor_error']

/** The most of a Reactor's error message a caller gets (the prelude cuts there too; this holds if it was tampered with). */
export const REACTOR_MESSAGE_MAX_CHARS = 500

function decodeError(meta: Record<string, unknown>): WireOutcome {
  // `reactor_timeout` is deliberately absent: only the host's clock may claim a time-out.
  const code = REACTOR_CODES.find((c) => c === meta.code) ?? 'reactor_error'
  const message = typeof meta.message === 'string' && meta.message !== '' ? meta.message : 'The Reactor failed without a message.'
  const detail = message.length > REACTOR_MESSAGE_MAX_CHARS ? `${message.slice(0, REACTOR_MESSAGE_MAX_CHARS)}...` : message
  return { kind: 'error', code, detail }
}

function decodeResponse(meta: Record<string, unknown>, json: string): WireOutcome {
  const status = meta.status
  if (!isAnswerStatus(status)) {
    return failure('CustomHttpResponseError needs an integer status between 200 and 599.')
  }
  if (!isRecord(meta.headers)) return failure('CustomHttpResponseError headers must be an object of strings.')
  const headers: Record<string, string> = {}
  for (const [name, value] of Object.entries(meta.headers)) {
    // Header names are never echoed: Reactor code may build them from revealed data.
    const text = headerValueText(value)
    if (text === undefined) return failure('Each CustomHttpResponseError header value must be a string.')
    if (!isHeaderName(name) || !isHeaderValue(text)) return failure('CustomHttpResponseError has an invalid header.')
    headers[name.toLowerCase()] = text
  }
  return { kind: 'response', status, headers, json }
}

function tooLarge(limit: number): WireOutcome {
  return failure(`The Reactor result is larger than the ${limit}-byte limit.`)
}

function failure(detail: string): WireOutcome {
  return { kind: 'error', code: 'reactor_error', detail }
}
