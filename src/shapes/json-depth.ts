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
