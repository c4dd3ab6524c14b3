import type { TokenPosition } from '../store/index.js'
import { ValidationError } from '../errors/index.js'
import { unsafeTextReason } from '../shapes/unsafe-text.js'
import { isStorableDateTime } from '../shapes/date-time.js'

// fatal: bytes that are not UTF-8 (a lone surrogate written out) must not become U+FFFD and name another id.
const utf8 = new TextDecoder('utf-8', { fatal: true })

/**
 * `pagination.next` of the `/v2` lists: the last row's (created_at, id), base64url JSON. Opaque
 * to clients; it names only a token the caller was shown, so it needs no signature.
 */
export function encodeCursor(position: TokenPosition): string {
  return Buffer.from(JSON.stringify([position.createdAt.toISOString(), position.id])).toString('base64url')
}

/**
 * The position a `start` names; a cursor that was not made by encodeCursor is a 400 on `field`.
 * The cursor is the client's text, so its date and id are checked as any input is: a NUL or an
 * out-of-range year reached the database (a 500).
 */
export function decodeCursor(cursor: string | undefined, field = 'start'): TokenPosition | undefined {
  if (cursor === undefined) return undefined
  try {
    const value: unknown = JSON.parse(utf8.decode(Buffer.from(cursor, 'base64url')))
    if (Array.isArray(value) && value.length === 2 && typeof value[0] === 'string' && typeof value[1] === 'string') {
      const [createdAt, id] = value as [string, string]
      if (isStorableDateTime(createdAt) && id.length > 0 && unsafeTextReason(id) === undefined) return { createdAt: new Date(createdAt), id }
    }
  } catch {
    // fall through: reported as a validation error below
  }
  throw ValidationError.field(field, 'is not a cursor this service issued')
}
