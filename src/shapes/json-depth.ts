/** Whether a parsed JSON value nests deeper than `max` levels; iterative, so any depth is safe to ask about. */
export function depthExceeds(root: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[root, 1]]
  while (stack.length) {
    const [value, depth] = stack.pop()!
    if (value === null || typeof value !== 'object') continue
    if (depth > max) return true
    for (const child of Object.values(value)) stack.push([child, depth + 1])
  }
  return false
}

/**
 * The same question of JSON text, without parsing it: brackets outside strings are counted. For
 * text that is valid JSON (as `JSON.stringify` wrote it) the answer is the parsed value's.
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
    if (!inString && BigInt(Number(m[0])) !== BigInt(m[0])) return m.index
  }
  return undefined
}
