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

/**
 * Whether JSON text may parse to a value in which findUnsafeText finds something: when false, it
 * finds nothing, and a large body need not be walked. Only for text that a fatal UTF-8 decoder
 * wrote (its surrogates come in pairs) and that JSON.parse accepted (no raw control character in
 * a string): a NUL is then only ever a `\u0000` escape, a lone surrogate a `\uD800`-`\uDFFF`
 * escape, and Infinity a literal that reaches 1.8e308: with an exponent of 100 or more (3 digits)
 * or else 210 digits or more before the point (200 leaves a margin). Strings are not told apart:
 * a match there only costs the walk. The lookbehind keeps the digit run linear (without it, 5 MB
 * of 199-digit runs took 900 ms).
 */
const MAY_BE_UNSAFE = /\\u(?:0000|[dD][89a-fA-F])|(?<![0-9])[0-9]{200}|[eE][+-]?[0-9]{3}/

export function jsonTextMayBeUnsafe(json: string): boolean {
  return MAY_BE_UNSAFE.test(json)
}

const NON_FINITE = 'must be a number within the range of a double (about ±1.8e308)'

/**
 * The first unsafe string (or a number out of range) in a parsed JSON value, keys included, as a field error named like the
 * validation errors (`rules[0].description`); undefined when every string is safe. A bad key is
 * reported on the object that holds it, so the error never has to repeat the key.
 *
 * It runs on JSON bodies (5 MB is a few million values), so the walk allocates nothing per value
 * but an object's key list: one frame per open container, kept in arrays reused level by level,
 * and the field path is spelled from those frames only once a problem is found. The order is
 * right to left, depth first, an object's keys checked as it is reached (the order of the first
 * version, which pushed every child on a stack): of several problems, the same one is named.
 */
export function findUnsafeText(root: unknown): FieldErrors | undefined {
  const walk: Walk = { containers: [], keys: [], next: [], depth: 0 }
  let problem = visit(walk, root)
  while (problem === undefined && walk.depth > 0) {
    const top = walk.depth - 1
    const index = walk.next[top]!
    if (index < 0) {
      walk.depth = top
      continue
    }
    walk.next[top] = index - 1
    const keys = walk.keys[top]
    const container = walk.containers[top] as Record<string, unknown>
    problem = visit(walk, keys === undefined ? container[index] : container[keys[index]!])
  }
  return problem === undefined ? undefined : { [pathOf(walk) || 'body']: [problem] }
}

/** The open containers, outermost first; `keys` is undefined for an array; `next` counts down. */
interface Walk {
  containers: object[]
  keys: (string[] | undefined)[]
  next: number[]
  depth: number
}

/**
 * The value's own problem (an unsafe string, a number out of range, a bad key of an object); a
 * container without one is opened, so its children are visited next, last one first.
 */
function visit(walk: Walk, value: unknown): string | undefined {
  if (typeof value === 'string') return unsafeTextReason(value)
  // JSON.parse turns a number beyond a double's range (1e400) into Infinity, which is stored
  // and answered as null: refused like any other value that cannot be held as sent.
  if (typeof value === 'number') return Number.isFinite(value) ? undefined : NON_FINITE
  if (value === null || typeof value !== 'object') return undefined
  let keys: string[] | undefined
  if (!Array.isArray(value)) {
    keys = Object.keys(value)
    for (let i = 0; i < keys.length; i++) {
      const reason = unsafeTextReason(keys[i]!)
      if (reason !== undefined) return `has a key that ${reason.replace('must not contain', 'contains')}`
    }
  }
  walk.containers[walk.depth] = value
  walk.keys[walk.depth] = keys
  walk.next[walk.depth] = (keys ?? (value as unknown[])).length - 1
  walk.depth++
  return undefined
}

/** The field path of the value visited last: each open container's `next` is one below the child being visited. */
function pathOf(walk: Walk): string {
  let path = ''
  for (let level = 0; level < walk.depth; level++) {
    const index = walk.next[level]! + 1
    const keys = walk.keys[level]
    path = keys === undefined ? `${path}[${index}]` : path === '' ? keys[index]! : `${path}.${keys[index]!}`
  }
  return path
}
