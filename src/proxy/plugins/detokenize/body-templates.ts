import { AppError } from '../../../errors/index.js'
import type { TokenLookup } from '../../../expressions/index.js'
import type { ForwardBody } from '../../../egress/forward.js'
import { planJson } from './json-templates.js'
import type { TokenBudget } from './token-budget.js'
import { planText } from './text-templates.js'

type BodyKind = 'json' | 'markup' | 'text' | 'form' | 'opaque'

const OPEN = Buffer.from('{{')
const utf8 = new TextDecoder('utf-8', { fatal: true })
// Only UTF-8 text is evaluated: a substituted value could not be spelled in another charset.
const UTF8_CHARSETS = new Set(['utf-8', 'utf8', 'us-ascii'])

/**
 * The body's expressions, by content type: JSON values; text/*, XML and form bodies by text
 * substitution, each value escaped for its syntax (JSON strings, XML and HTML character
 * references, URL-encoded form values; other text as it is), so token data cannot add elements
 * or fields to the caller's document; any other body is forwarded byte for byte. Returns null
 * when there is nothing to substitute, so the body goes out untouched, without a copy.
 */
export function planBody(body: ForwardBody, contentType: string | undefined, budget: TokenBudget): ((lookup: TokenLookup) => Buffer) | null {
  if (!mayHoldExpressions(body)) return null
  const kind = bodyKind(contentType)
  if (kind === 'opaque') return null
  const text = decode(body, contentType)
  const render = kind === 'json' ? planJson(text, budget) : planText(text, budget, TEXT_ENCODERS[kind])
  return render && ((lookup) => Buffer.from(render(lookup), 'utf8'))
}

export function bodyKind(contentType: string | undefined): BodyKind {
  if (contentType === undefined) return 'opaque'
  const semicolon = contentType.indexOf(';')
  const mime = (semicolon === -1 ? contentType : contentType.slice(0, semicolon)).trim().toLowerCase()
  if (mime === 'application/json' || mime.endsWith('+json')) return 'json'
  if (mime === 'application/x-www-form-urlencoded') return 'form'
  if (mime === 'application/xml' || mime.endsWith('+xml') || mime === 'text/xml' || mime === 'text/html') return 'markup'
  if (mime.startsWith('text/')) return 'text'
  return 'opaque'
}

const MARKUP_SPECIAL = /[&<>"']/g
const MARKUP_REFERENCE: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }
const escapeMarkup = (value: string): string => value.replace(MARKUP_SPECIAL, (c) => MARKUP_REFERENCE[c]!)
const TEXT_ENCODERS: Record<'markup' | 'text' | 'form', ((value: string) => string) | undefined> = { markup: escapeMarkup, text: undefined, form: encodeURIComponent }

/** A cheap pre-check: false means no expression can be in the body, whatever its type. */
export function mayHoldExpressions(body: ForwardBody): body is string | Uint8Array {
  // A stream (set by an earlier plugin) cannot be inspected without buffering it: left alone.
  if (body === null || (typeof body !== 'string' && !(body instanceof Uint8Array))) return false
  if (typeof body === 'string') return body.includes('{{')
  return Buffer.from(body.buffer, body.byteOffset, body.byteLength).indexOf(OPEN) !== -1
}

function decode(body: string | Uint8Array, contentType: string | undefined): string {
  if (typeof body === 'string') return body
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(contentType ?? '')?.[1]?.toLowerCase()
  if (charset !== undefined && !UTF8_CHARSETS.has(charset)) {
    throw new AppError('bad_request', { detail: `Expressions are evaluated only in UTF-8 bodies, not ${charset}.` })
  }
  try {
    return utf8.decode(body)
  } catch (cause) {
    throw new AppError('bad_request', { detail: 'The body holds expressions but is not valid UTF-8.', cause })
  }
}
