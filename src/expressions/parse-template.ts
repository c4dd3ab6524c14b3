import { ExpressionError, quoteSnippet } from './expression-error.js'
import { buildFilter, type FilterArg, type FilterCall } from './filters.js'
import { tokenIdProblem } from './token-id.js'

export interface Expression {
  tokenId: string
  /** Offset of the token id. */
  idPosition: number
  filters: FilterCall[]
  /** Offset of the opening `{{`. */
  start: number
  /** Offset just past the closing `}}`. */
  end: number
}

export type TemplatePart = string | Expression

export interface Template {
  /** Literal text and expressions in order; adjacent literals never occur. */
  parts: TemplatePart[]
  /** The expression when the string is exactly one expression and nothing else, else null. */
  single: Expression | null
  /** Token ids in order of first appearance, without repeats. */
  tokenIds: string[]
}

// Integer arguments are indexes and lengths; nine digits keep them exact and far from overflow.
const MAX_INT_DIGITS = 9

/**
 * Parses `{{ id | filter: arg, arg | filter }}` expressions out of `source`. A hand-written
 * scanner rather than a regular expression: every character is looked at a bounded number of
 * times, so hostile input cannot trigger backtracking, and errors can say exactly where.
 */
export function parseTemplate(source: string): Template {
  const parts: TemplatePart[] = []
  const tokenIds = new Set<string>()
  let last = 0
  let open = source.indexOf('{{')
  while (open !== -1) {
    if (open > last) parts.push(source.slice(last, open))
    const expression = new Scanner(source, open).expression()
    parts.push(expression)
    tokenIds.add(expression.tokenId)
    last = expression.end
    open = source.indexOf('{{', last)
  }
  if (last < source.length) parts.push(source.slice(last))
  const only = parts.length === 1 ? parts[0] : undefined
  return { parts, single: typeof only === 'object' ? only : null, tokenIds: [...tokenIds] }
}

class Scanner {
  private i: number

  constructor(
    private readonly s: string,
    private readonly open: number,
  ) {
    this.i = open + 2
  }

  expression(): Expression {
    // Stops at this expression's own `}}` at the latest, so the scan stays linear overall.
    if (this.s.indexOf('}}', this.i) === -1) throw this.unclosed()
    this.skipSpace()
    const idPosition = this.i
    const tokenId = this.tokenId()
    const filters: FilterCall[] = []
    this.skipSpace()
    while (this.s[this.i] === '|') {
      this.i++
      filters.push(this.filter())
      this.skipSpace()
    }
    if (!this.s.startsWith('}}', this.i)) throw this.unexpected("'|' or '}}'")
    return { tokenId, idPosition, filters, start: this.open, end: this.i + 2 }
  }

  private tokenId(): string {
    const start = this.i
    while (this.i < this.s.length && !isIdEnd(this.s.charCodeAt(this.i))) this.i++
    const id = this.s.slice(start, this.i)
    if (id === '') throw this.unexpected('a token id')
    const problem = tokenIdProblem(id)
    if (problem !== null) throw new ExpressionError(start, `invalid token id: ${problem}`)
    return id
  }

  private filter(): FilterCall {
    this.skipSpace()
    const start = this.i
    while (this.i < this.s.length && isNameChar(this.s.charCodeAt(this.i))) this.i++
    if (this.i === start) throw this.unexpected("a filter name after '|'")
    const name = this.s.slice(start, this.i)
    this.skipSpace()
    const args: FilterArg[] = []
    if (this.s[this.i] === ':') {
      this.i++
      for (;;) {
        this.skipSpace()
        args.push(this.argument())
        this.skipSpace()
        if (this.s[this.i] !== ',') break
        this.i++
      }
    }
    return buildFilter(name, start, args)
  }

  private argument(): FilterArg {
    const position = this.i
    const ch = this.s[this.i]
    if (ch === "'" || ch === '"') return { value: this.quoted(ch), position }
    const digitsFrom = ch === '-' ? this.i + 1 : this.i
    let end = digitsFrom
    while (end < this.s.length && isDigit(this.s.charCodeAt(end))) end++
    if (end === digitsFrom) throw this.unexpected('a quoted string or an integer argument')
    if (end - digitsFrom > MAX_INT_DIGITS) throw new ExpressionError(position, 'integer argument is too large')
    this.i = end
    return { value: Number(this.s.slice(position, end)), position }
  }

  /** A quoted literal; a backslash makes the next character literal. */
  private quoted(quote: string): string {
    const start = this.i
    let out = ''
    let from = ++this.i
    while (this.i < this.s.length) {
      const ch = this.s[this.i]
      if (ch === quote) {
        out += this.s.slice(from, this.i++)
        return out
      }
      if (ch === '\\') {
        out += this.s.slice(from, this.i)
        from = this.i + 1
        this.i += 2
      } else {
        this.i++
      }
    }
    throw new ExpressionError(start, 'unterminated string argument')
  }

  private unclosed(): ExpressionError {
    return new ExpressionError(this.open, "unclosed expression: '{{' without a matching '}}'")
  }

  private skipSpace(): void {
    while (this.i < this.s.length && isSpace(this.s.charCodeAt(this.i))) this.i++
  }

  /** An unclosed expression is the likelier mistake whenever no `}}` follows at all. */
  private unexpected(expected: string): ExpressionError {
    if (this.s.indexOf('}}', this.i) === -1) return this.unclosed()
    const found = this.i < this.s.length ? quoteSnippet(this.s.slice(this.i, this.i + 1)) : 'the end'
    return new ExpressionError(this.i, `expected ${expected}, found ${found}`)
  }
}

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d
}

function isDigit(c: number): boolean {
  return c >= 0x30 && c <= 0x39
}

function isNameChar(c: number): boolean {
  return (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || isDigit(c) || c === 0x5f
}

/** An id runs to whitespace, `|` or `}`; other forbidden characters are reported by tokenIdProblem. */
function isIdEnd(c: number): boolean {
  return isSpace(c) || c === 0x7c || c === 0x7d
}
