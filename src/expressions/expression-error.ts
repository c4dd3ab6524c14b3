/**
 * A malformed expression, or a filter that cannot apply to the value it receives. The lead maps
 * it to a 400. `reason` never quotes token data: only the template's own text (filter names,
 * arguments) and value *types* appear in it, because the message reaches the caller and logs.
 */
export class ExpressionError extends Error {
  /** 0-based offset, in UTF-16 code units, into the string that holds the expression. */
  readonly position: number
  readonly reason: string
  /** RFC 6901 pointer to the string inside a JSON value, when the error came from a walk. */
  readonly pointer: string | undefined

  constructor(position: number, reason: string, pointer?: string) {
    const where = pointer === undefined ? `position ${position}` : `${pointer === '' ? '/' : pointer} position ${position}`
    super(`Invalid expression at ${where}: ${reason}`)
    this.name = 'ExpressionError'
    this.position = position
    this.reason = reason
    this.pointer = pointer
  }

  /** The same error, located inside a JSON value. */
  at(pointer: string): ExpressionError {
    return new ExpressionError(this.position, this.reason, pointer)
  }
}

/** Template text quoted in a reason is cut short so an error never carries a large payload. */
export function quoteSnippet(text: string, max = 32): string {
  const cut = text.length > max ? `${text.slice(0, max)}...` : text
  return JSON.stringify(cut)
}
