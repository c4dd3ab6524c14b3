/**
 * Whether a parsed JSON value nests deeper than `max` levels; iterative, so any depth is safe to
 * ask about. Nothing is allocated per value (only an object's key list): one frame per open
 * container, at most `max` of them, kept in arrays reused level by level.
 */
export function depthExceeds(root: unknown, max: number): boolean {
  if (root === null || typeof root !== 'object') return false
  if (max < 1) return true
  const containers: Record<string, unknown>[] = []
  const keys: (string[] | undefined)[] = []
  const next: number[] = []
  let depth = 0
  for (let value: unknown = root; ; ) {
    if (value !== null && typeof value === 'object') {
      if (depth >= max) return true
      const list = Array.isArray(value) ? undefined : Object.keys(value)
      containers[depth] = value as Record<string, unknown>
      keys[depth] = list
      next[depth] = (list ?? (value as unknown[])).length
      depth++
    }
    // the next value: the following child of the innermost container that has one left
    while (depth > 0 && next[depth - 1] === 0) depth--
    if (depth === 0) return false
    const index = --next[depth - 1]!
    const list = keys[depth - 1]
    value = containers[depth - 1]![list === undefined ? index : list[index]!]
  }
}

/**
 * The same question of JSON text, without parsing it: brackets outside strings are counted (a
 * backslash in a string skips the next character, so `"\\"` and `"\""` end where JSON says). For
 * text that is valid JSON (as `JSON.stringify` wrote it) the answer is the parsed value's; text
 * with a repeated key may be deeper than its value (JSON.parse keeps the last one), never shallower.
 */
export function textDepthExceeds(json: string, max: number): boolean {
  let depth = 0
  let inString = false
  for (let i = 0; i < json.length; i++) {
    const c = json.charCodeAt(i)
    if (inString) {
      if (c === 0x5c) i++ // a backslash: the next character is escaped
      else if (c === 0x22) inString = false
    } else if (c === 0x22) inString = true
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true
    } else if (c === 0x5d || c === 0x7d) depth--
  }
  return false
}

// A JSON number literal that is an integer (no fraction, no exponent) of 16 digits or more.
const LONG_INTEGER = /(?<![0-9.eE+-])-?[0-9]{16,}(?![.eE0-9])/g

/**
 * The position of the first integer literal in JSON text that parsing does not hold exactly
 * (12345678901234567891 parses to 12345678901234567000): a double has 53 bits. Literals inside
 * strings are skipped; exact ones (9007199254740992) and floats (1e20, 2.5e17) pass. One pass:
 * whether a match lies in a string is carried on from the previous match.
 */
export function inexactIntegerAt(json: string): number | undefined {
  LONG_INTEGER.lastIndex = 0
  let scanned = 0
  let inString = false
  for (let m = LONG_INTEGER.exec(json); m !== null; m = LONG_INTEGER.exec(json)) {
    for (; scanned < m.index; scanned++) {
      const c = json.charCodeAt(scanned)
      if (inString && c === 0x5c) scanned++
      else if (c === 0x22) inString = !inString
    }
    // Beyond a double's range (309 digits or more) it parses to Infinity, which BigInt refuses
    // (a 500): that is the range check's to refuse, naming the field.
    const parsed = Number(m[0])
    if (!inString && Number.isFinite(parsed) && BigInt(parsed) !== BigInt(m[0])) return m.index
  }
  return undefined
}
