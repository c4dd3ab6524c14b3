/**
 * Whether a raw (undecoded) URL path could leave its base on some server. The proxy forwards the
 * path byte for byte, so it must refuse every spelling a destination (or a server in front of
 * it) might resolve as `..`:
 * - `..` as a whole segment, in any mix of literal dots and `%2e`;
 * - `.`/`..` followed by path parameters (`..;x`, `..%3b`): Tomcat and Spring drop the
 *   parameters and resolve the dots;
 * - `..` followed by dots or spaces (`.. `, `...`): Windows servers strip those;
 * - a control character anywhere (`..%09`, `.%0a.`, `..%00`): WHATWG URL parsing strips tab, CR
 *   and LF, C strings end at NUL, and servers trim the others;
 * - each of these behind `%2f`/`%5c` separators, double or triple percent-encoded (`%252e`),
 *   as IIS `%u002e`, or as characters that Unicode compatibility normalization (NFKC) folds into
 *   `.`, `/`, `\`, `;` or `%` (`‥`, U+FF0E, U+FF3C...), which servers that normalize resolve;
 * - overlong UTF-8 (`%c0%ae`), which no valid path contains and lenient decoders read as ASCII;
 * - an empty segment (`//`), which some servers collapse and others treat as the root.
 */
export function hasTraversal(rawPath: string): boolean {
  let path = fold(rawPath)
  for (let round = 0; round <= DECODE_ROUNDS; round++) {
    if (CONTROL.test(path) || OVERLONG.test(path) || hasDotSegment(path)) return true
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
// C0 controls, DEL and C1 controls (NEL, U+0085, is a line end to some).
const CONTROL = /\p{Cc}/u
// Overlong UTF-8 of a character below U+0800 (2 and 3 bytes) or U+10000 (4 bytes). Only with a
// continuation byte after `%c0`/`%c1`, which alone are Latin-1 letters.
const OVERLONG = /%c[01]%[89ab]|%e0%[89]|%f0%8/i

/** A `..` segment (or dots with parameters), or an empty segment between two separators. */
function hasDotSegment(path: string): boolean {
  const segments = path.split(SEPARATOR)
  return segments.some((segment, i) => {
    if (segment === '') return i > 0 && i < segments.length - 1
    if (PARENT.test(segment)) return true
    const end = segment.indexOf(';')
    return end !== -1 && DOTS.test(segment.slice(0, end))
  })
}

const IIS_ESCAPE = /%u([0-9a-f]{4})/gi
const ESCAPES = /(?:%[0-9a-f]{2})+/gi

/** One round of percent-decoding (bytes as UTF-8, invalid ones as U+FFFD), then folded. */
function decodeRound(path: string): string {
  const decoded = path
    .replace(IIS_ESCAPE, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)))
    .replace(ESCAPES, (run) => Buffer.from(run.replaceAll('%', ''), 'hex').toString('utf8'))
  return fold(decoded)
}

// NFKC folds U+FF0F and friends into `/`, but not the division slash, which Windows' best-fit
// code pages turn into `/` all the same.
function fold(path: string): string {
  return path.normalize('NFKC').replaceAll('\u2215', '/')
}
