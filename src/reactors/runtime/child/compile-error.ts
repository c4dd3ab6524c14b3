/**
 * isolated-vm reports compile errors as "<message> [<file>:<line>:<column>]"; Reactor authors
 * get the position in words, already in their own line numbers (see MODULE_LINE_OFFSET).
 */
const POSITION = /\s*\[reactor\.js:(\d+):(\d+)\]\s*$/

/** "Unexpected token ';' [reactor.js:3:9]" -> "SyntaxError: Unexpected token ';' (line 3, column 9)". */
export function describeCompileError(err: unknown, code?: string): string {
  const name = err instanceof Error ? err.name : 'SyntaxError'
  const message = (err instanceof Error ? err.message : String(err)).split('\n')[0] ?? ''
  const match = POSITION.exec(message)
  if (match === null) return `${name}: ${message}`
  const text = message.slice(0, match.index)
  // A line past the user's last one is the wrapper's closing line: the code ended too early.
  if (code !== undefined && Number(match[1]) > code.split('\n').length) return `${name}: ${text} (at the end of the code)`
  return `${name}: ${text} (line ${match[1]}, column ${match[2]})`
}
