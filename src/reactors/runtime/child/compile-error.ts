/**
 * isolated-vm reports compile errors as "<message> [<file>:<line>:<column>]"; Reactor authors
 * get the position in words, already in their own line numbers (see MODULE_LINE_OFFSET).
 */
const POSITION = /\s*\[reactor\.js:(\d+):(\d+)\]\s*$/
/**
 * V8 quotes the code in some messages (a whole regular expression literal): cut, so the position
 * still fits in the 500 characters a caller gets (worker.ts cuts every detail there).
 */
const TEXT_MAX_CHARS = 300

/** "Unexpected token ';' [reactor.js:3:9]" -> "SyntaxError: Unexpected token ';' (line 3, column 9)". */
export function describeCompileError(err: unknown, code?: string): string {
  const name = err instanceof Error ? err.name : 'SyntaxError'
  const message = (err instanceof Error ? err.message : String(err)).split('\n')[0] ?? ''
  const match = POSITION.exec(message)
  if (match === null) return `${name}: ${shorten(message)}`
  const text = shorten(message.slice(0, match.index))
  // A line past the user's last one is the wrapper's closing line: the code ended too early.
  if (code !== undefined && Number(match[1]) > code.split('\n').length) return `${name}: ${text} (at the end of the code)`
  return `${name}: ${text} (line ${match[1]}, column ${match[2]})`
}

/** The first line of a compiler message, cut (see TEXT_MAX_CHARS). */
export function compilerMessage(err: unknown): string {
  return shorten((err instanceof Error ? err.message : String(err)).split('\n')[0] ?? '')
}

function shorten(text: string): string {
  return text.length > TEXT_MAX_CHARS ? `${text.slice(0, TEXT_MAX_CHARS)}...` : text
}
