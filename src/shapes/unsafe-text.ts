import type { FieldErrors } from '../errors/index.js'

/**
 * Strings that cannot be stored or handed back faithfully: Postgres refuses NUL in text and
 * jsonb (so it surfaced as a 500), and a lone UTF-16 surrogate has no UTF-8 form (it was stored
 * as U+FFFD, so a token created under such an id got back an id it could never use).
 */
// With the `u` flag a well-formed pair is one code point, so only a lone surrogate is \p{Cs}.
const LONE_SURROGATE = /\p{Cs}/u

export function unsafeTextReason(text: string): string | undefined {
  if (text.includes('\0')) return 'must not contain NUL characters'
  if (LONE_SURROGATE.test(text)) return 'must not contain unpaired UTF-16 surrogates'
  return undefined
}

const NON_FINITE = 'must be a number within the range of a double (about ±1.8e308)'

/**
 * The first unsafe string (or a number out of range) in a parsed JSON value, keys included, as a field error named like the
 * validation errors (`rules[0].description`); undefined when every string is safe. A bad key is
 * reported on the object that holds it, so the error never has to repeat the key.
 */
export function findUnsafeText(root: unknown): FieldErrors | undefined {
  const stack: [unknown, string][] = [[root, '']]
  while (stack.length > 0) {
    const [value, path] = stack.pop()!
    if (typeof value === 'string') {
      const reason = unsafeTextReason(value)
      if (reason !== undefined) return { [path || 'body']: [reason] }
      continue
    }
    // JSON.parse turns a number beyond a double's range (1e400) into Infinity, which is stored
    // and answered as null: refused like any other value that cannot be held as sent.
    if (typeof value === 'number' && !Number.isFinite(value)) return { [path || 'body']: [NON_FINITE] }
    if (value === null || typeof value !== 'object') continue
    if (Array.isArray(value)) {
      value.forEach((item, i) => stack.push([item, `${path}[${i}]`]))
      continue
    }
    for (const [key, item] of Object.entries(value)) {
      const reason = unsafeTextReason(key)
      if (reason !== undefined) return { [path || 'body']: [`has a key that ${reason.replace('must not contain', 'contains')}`] }
      stack.push([item, path === '' ? key : `${path}.${key}`])
    }
  }
  return undefined
}
