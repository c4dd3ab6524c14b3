import { ExpressionError, type Template } from '../../../expressions/index.js'

/**
 * The distinct token ids of one request, body and headers together: they are loaded with one
 * vault query, and the limit counts the request as a whole, not each part on its own.
 */
export class TokenBudget {
  readonly ids = new Set<string>()

  constructor(private readonly max: number) {}

  /** Throws ExpressionError at the first expression whose token is one too many. */
  take(template: Template): void {
    for (const part of template.parts) {
      if (typeof part === 'string' || this.ids.has(part.tokenId)) continue
      if (this.ids.size >= this.max) {
        throw new ExpressionError(part.start, `too many tokens: at most ${this.max} distinct tokens may be referenced`)
      }
      this.ids.add(part.tokenId)
    }
  }
}
