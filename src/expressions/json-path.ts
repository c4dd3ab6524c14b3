/**
 * The JSONPath subset the `json` filter accepts: `$`, then any of `.key`, `['key']` / `["key"]`
 * and `[index]`. Wildcards, recursive descent, slices and filters are deliberately absent: each
 * segment selects at most one value, so evaluation is a plain walk with no search.
 */
export type PathSegment = { key: string } | { index: number }

export class JsonPathError extends Error {
  constructor(
    readonly offset: number,
    readonly reason: string,
  ) {
    super(reason)
    this.name = 'JsonPathError'
  }
}

const MAX_INDEX_DIGITS = 9

export function parseJsonPath(path: string): PathSegment[] {
  if (path[0] !== '$') throw new JsonPathError(0, "a JSONPath must start with '$'")
  const segments: PathSegment[] = []
  let i = 1
  while (i < path.length) {
    const ch = path[i]
    if (ch === '.') i = readDotKey(path, i + 1, segments)
    else if (ch === '[') i = readBracket(path, i + 1, segments)
    else throw new JsonPathError(i, `unexpected ${JSON.stringify(ch)}, expected '.' or '['`)
  }
  return segments
}

function readDotKey(path: string, start: number, out: PathSegment[]): number {
  let i = start
  while (i < path.length && path[i] !== '.' && path[i] !== '[') i++
  if (i === start) throw new JsonPathError(start, "expected a key after '.'")
  const key = path.slice(start, i)
  if (key === '*') throw new JsonPathError(start, 'wildcards are not supported')
  out.push({ key })
  return i
}

function readBracket(path: string, start: number, out: PathSegment[]): number {
  const quote = path[start]
  if (quote === "'" || quote === '"') {
    const end = path.indexOf(quote, start + 1)
    if (end === -1) throw new JsonPathError(start, 'unterminated quoted key')
    if (path[end + 1] !== ']') throw new JsonPathError(end + 1, "expected ']' after a quoted key")
    out.push({ key: path.slice(start + 1, end) })
    return end + 2
  }
  let i = start
  while (i < path.length && path.charCodeAt(i) >= 48 && path.charCodeAt(i) <= 57) i++
  if (i === start) throw new JsonPathError(start, 'expected a quoted key or a non-negative index inside [ ]')
  if (i - start > MAX_INDEX_DIGITS) throw new JsonPathError(start, 'index is too large')
  if (path[i] !== ']') throw new JsonPathError(i, "expected ']' after an index")
  out.push({ index: Number(path.slice(start, i)) })
  return i + 1
}

/** The selected value, or undefined when any segment is missing. Only own properties count. */
export function evaluateJsonPath(value: unknown, segments: readonly PathSegment[]): unknown {
  let current = value
  for (const segment of segments) {
    if ('key' in segment) {
      if (current === null || typeof current !== 'object' || Array.isArray(current)) return undefined
      if (!Object.hasOwn(current, segment.key)) return undefined
      current = (current as Record<string, unknown>)[segment.key]
    } else {
      if (!Array.isArray(current) || segment.index >= current.length) return undefined
      current = current[segment.index]
    }
  }
  return current
}
