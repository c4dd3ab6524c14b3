import { evaluateExpression, parseTemplate, toText, type TokenLookup } from '../../../expressions/index.js'
import type { TokenBudget } from './token-budget.js'

/**
 * Expressions in a text, XML or form body (or a header value), substituted as text. `encode`
 * is applied to each substituted value only, e.g. URL-encoding for a form body, so the caller's
 * own text is never re-encoded.
 */
export function planText(text: string, budget: TokenBudget, encode?: (value: string) => string): (lookup: TokenLookup) => string {
  const template = parseTemplate(text)
  budget.take(template)
  return (lookup) => {
    let out = ''
    for (const part of template.parts) {
      if (typeof part === 'string') out += part
      else out += encode ? encode(toText(evaluateExpression(part, lookup))) : toText(evaluateExpression(part, lookup))
    }
    return out
  }
}
