/**
 * Whether a raw (undecoded) URL path could leave its base on some server. The proxy forwards the
 * path byte for byte, so it must refuse every spelling a destination (or a server in front of
 * it) might resolve as `..`:
 * - `..` as a whole segment, in any mix of literal dots and `%2e`;
 * - `.`/`..` followed by path parameters or a NUL (`..;x`, `..%3b`, `..%00`): Tomcat and Spring
 *   drop the parameters and resolve the dots;
 * - `..` followed by dots or spaces (`.. `, `...`): Windows servers strip those;
 * - each of these behind `%2f`/`%5c` separators, double or triple percent-encoded (`%252e`),
 *   as overlong UTF-8 (`%c0%ae`), `%u002e`, or fullwidth / division-slash look-alikes that
 *   servers fold to `.` and `/`;
 * - an empty segment (`//`), which some servers collapse and others treat as the root.
 */
export function hasTraversal(rawPath: string): boolean {
  let path = rawPath
  for (let round = 0; round <= DECODE_ROUNDS; round++) {
    if (hasDotSegment(path)) return true
    if (!path.includes('%')) return false
    const decoded = decodeRound(path)
    if (decoded === path) return false
    path = decoded
  }
  return false
}

/** Servers decode once, some twice; a third round costs nothing and covers a proxy in between. */
const DECODE_ROUNDS = 3

const SEPARATOR = /[/\\]/
const PARENT = /^\.\.[. ]*$/
const DOTS = /^\.+[. ]*$/

/** A `..` segment (or dots with parameters), or an empty segment between two separators. */
function hasDotSegment(path: string): boolean {
  const segments = path.split(SEPARATOR)
  return segments.some((segment, i) => {
    if (segment === '') return i > 0 && i < segments.length - 1
    if (PARENT.test(segment)) return true
    const end = segment.search(/[;\0]/)
    return end !== -1 && DOTS.test(segment.slice(0, end))
  })
}

// Spellings of `.`, `/` and `\` that are not `%2e`/`%2f`/`%5c`: overlong UTF-8, IIS `%u`, and
// the fullwidth full stop / solidus and the division slash that Unicode normalization folds.
const LOOK_ALIKES: Record<string, string> = {
  '%c0%ae': '.',
  '%e0%80%ae': '.',
  '%u002e': '.',
  '%ef%bc%8e': '.',
  '%c0%af': '/',
  '%e0%80%af': '/',
  '%u002f': '/',
  '%ef%bc%8f': '/',
  '%e2%88%95': '/',
  '%u2215': '/',
  '%c1%9c': '\\',
  '%u005c': '\\',
}
const LOOK_ALIKE = new RegExp(Object.keys(LOOK_ALIKES).join('|'), 'gi')
// Only ASCII escapes are decoded: a multi-byte character cannot spell a separator or a dot.
const ASCII_ESCAPE = /%([0-7][0-9a-f])/gi

function decodeRound(path: string): string {
  return path
    .replace(LOOK_ALIKE, (m) => LOOK_ALIKES[m.toLowerCase()] ?? m)
    .replace(ASCII_ESCAPE, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)))
}
