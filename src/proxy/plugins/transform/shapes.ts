import { AppError } from '../../../errors/index.js'
import type { ResponseHeaders } from '../../../egress/headers.js'
import { headerValueText, isAnswerHeader, isAnswerStatus, isHeaderName, isHeaderValue, isRecord, isEndToEndHeader } from '../../../shapes/http-parts.js'
import { bodyKind } from '../detokenize/body-templates.js'

/**
 * What transform code sees and what it may hand back. Bodies go in as parsed JSON when the
 * content type is JSON (and the body parses), otherwise as text, `null` when empty; a body
 * handed back as anything but a string is serialized as JSON. Headers are a plain object of
 * lower-case names. Everything coming back is checked here, as the Reactor runtime checks a
 * CustomHttpResponseError: transform code is tenant code.
 */

/** TransformKind side of the exchange a transform runs on. */
export type TransformKind = 'request' | 'response'

export function malformed(which: TransformKind, detail: string): AppError {
  return new AppError('reactor_error', { detail: `The ${which} transform returned a malformed value: ${detail}` })
}

export function bodyArg(body: Buffer, contentType: string | undefined): unknown {
  if (body.length === 0) return null
  const text = body.toString('utf8')
  if (bodyKind(contentType) !== 'json') return text
  try {
    return JSON.parse(text) as unknown
  } catch {
    return text
  }
}

/** A body handed back: a string as is, null for none, anything else as JSON. */
export function encodeBody(value: unknown): { bytes: Buffer; json: boolean } {
  if (value === null) return { bytes: Buffer.alloc(0), json: false }
  if (typeof value === 'string') return { bytes: Buffer.from(value, 'utf8'), json: false }
  return { bytes: Buffer.from(JSON.stringify(value), 'utf8'), json: true }
}

/** Flat `[name, value, ...]` (already filtered for forwarding) -> `{name: value}`, repeats joined. */
export function requestHeaderArg(list: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {}
  for (let i = 0; i + 1 < list.length; i += 2) {
    const name = (list[i] as string).toLowerCase()
    const value = list[i + 1] as string
    out[name] = out[name] === undefined ? value : `${out[name]}, ${value}`
  }
  return out
}

/** The destination's headers without framing; Set-Cookie stays a list, the one header that cannot be joined. */
export function responseHeaderArg(headers: ResponseHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {}
  for (const name in headers) {
    const value = headers[name] as string | string[]
    if (!isEndToEndHeader(name)) continue
    out[name] = Array.isArray(value) && name !== 'set-cookie' ? value.join(', ') : value
  }
  return out
}

/** `{name: string | number | string[]}` -> checked `[name, value][]`, framing and hop-by-hop dropped. */
export function returnedHeaders(which: TransformKind, value: unknown): [string, string][] {
  if (!isRecord(value)) throw malformed(which, '`headers` must be an object.')
  const out: [string, string][] = []
  for (const [name, raw] of Object.entries(value)) {
    // Header names are never echoed: transform code may build them from revealed data.
    if (!isHeaderName(name)) throw malformed(which, 'a header name is not a valid token.')
    for (const item of Array.isArray(raw) ? (raw as unknown[]) : [raw]) {
      const text = headerValueText(item)
      if (text === undefined) throw malformed(which, 'header values must be strings.')
      if (!isHeaderValue(text)) throw malformed(which, 'a header value contains a control character or one outside Latin-1.')
      const lower = name.toLowerCase()
      if (which === 'response' ? isAnswerHeader(lower) : isEndToEndHeader(lower)) out.push([name, text])
    }
  }
  return out
}

/** A transform's status: an integer the caller can be answered with. */
export function returnedStatus(value: unknown): number {
  if (!isAnswerStatus(value)) {
    throw malformed('response', '`status` must be an integer between 200 and 599.')
  }
  return value
}
