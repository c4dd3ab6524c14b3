import { unsafeTextReason } from '../shapes/unsafe-text.js'

export const TOKEN_ID_MIN_LENGTH = 3
export const TOKEN_ID_MAX_LENGTH = 400

// API.md forbids these in client-chosen ids because they are significant in URLs and in the
// expression grammar.
const FORBIDDEN = new Set('#/\\+?[]|&=%<>{}^')

/**
 * Why `id` cannot be a token id, or null when it can. Beyond API.md's list, whitespace and
 * control characters are refused too: the expression grammar ends an id at whitespace, so an
 * id containing one could never be referenced, and control characters corrupt logs and headers.
 * So is a lone surrogate: stored as U+FFFD, the token would answer to another id than its own.
 */
export function tokenIdProblem(id: string): string | null {
  if (id.length < TOKEN_ID_MIN_LENGTH || id.length > TOKEN_ID_MAX_LENGTH) {
    return `must be ${TOKEN_ID_MIN_LENGTH} to ${TOKEN_ID_MAX_LENGTH} characters`
  }
  for (let i = 0; i < id.length; i++) {
    const ch = id[i] as string
    const code = ch.charCodeAt(0)
    if (FORBIDDEN.has(ch)) return `must not contain ${JSON.stringify(ch)}`
    if (code <= 0x20 || code === 0x7f || isUnicodeSpace(code)) return 'must not contain whitespace or control characters'
  }
  return unsafeTextReason(id) ?? null
}

export function isValidTokenId(id: unknown): id is string {
  return typeof id === 'string' && tokenIdProblem(id) === null
}

function isUnicodeSpace(code: number): boolean {
  return code === 0x85 || code === 0xa0 || code === 0x1680 || (code >= 0x2000 && code <= 0x200a) ||
    code === 0x2028 || code === 0x2029 || code === 0x202f || code === 0x205f || code === 0x3000 || code === 0xfeff
}
