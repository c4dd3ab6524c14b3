import type { TokenPosition } from '../store/index.js'
import { ValidationError } from '../errors/index.js'

/**
 * `pagination.next` of the `/v2` lists: the last row's (created_at, id), base64url JSON. Opaque
 * to clients; it names only a token the caller was shown, so it needs no signature.
 */
export function encodeCursor(position: TokenPosition): string {
  return Buffer.from(JSON.stringify([position.createdAt.toISOString(), position.id])).toString('base64url')
}

/** The position a `start` names; a cursor that was not made by encodeCursor is a 400 on `field`. */
export function decodeCursor(cursor: string | undefined, field = 'start'): TokenPosition | undefined {
  if (cursor === undefined) return undefined
  try {
    const value: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'))
    if (Array.isArray(value) && value.length === 2 && typeof value[0] === 'string' && typeof value[1] === 'string') {
      const createdAt = new Date(value[0])
      if (!Number.isNaN(createdAt.getTime()) && value[1].length > 0) return { createdAt, id: value[1] }
    }
  } catch {
    // fall through: reported as a validation error below
  }
  throw ValidationError.field(field, 'is not a cursor this service issued')
}
