import { evaluateExpression, parseTemplate, toText, type TokenLookup } from '../../expressions/index.js'
import { dataLookup, compileDataTemplate, dataRenderBudget } from './data-template.js'
import type { TokenType } from './token-type.js'

/**
 * The canonical string a token's fingerprint is the keyed hash of (`TokenDataHasher.fingerprint`),
 * or null when the expression yields nothing, so that tokens missing a field never
 * deduplicate into one. The expression runs over the type's canonical data, and the result is
 * serialized as JSON with sorted keys so that key order never changes a fingerprint.
 */
export function fingerprintInput(type: TokenType, data: unknown, expression = type.defaultFingerprintExpression): string | null {
  const canonical = type.canonicalize(data)
  const lookup = dataLookup(canonical)
  const value = compileDataTemplate(expression).render(lookup, dataRenderBudget(canonical))
  if (value === null || value === '' || !rendersData(expression, lookup)) return null
  return canonicalJson(value)
}

/**
 * Whether some expression of `template` renders any of the data: text around references that
 * all render nothing (a missing field, `slice: 0, 0`) is literal text alone, which would make
 * the token equal to a value it does not hold (validation refuses only templates without any
 * reference). Called after the template rendered, so it parses and applies.
 */
function rendersData(template: string, lookup: TokenLookup): boolean {
  const { parts, single } = parseTemplate(template)
  if (single !== null) return true
  return parts.some((part) => typeof part !== 'string' && toText(evaluateExpression(part, lookup)) !== '')
}

/**
 * The distinct values a token's `search_indexes` expressions produce over its data, as text,
 * ready for `TokenDataHasher.searchIndexHash`. Empty results are dropped: they would match every
 * token whose field is missing; so are results of literal text alone (`rendersData`). All of
 * them together share one `dataRenderBudget`.
 */
export function searchIndexValues(data: unknown, expressions: readonly string[], budget = dataRenderBudget(data)): string[] {
  const lookup = dataLookup(data)
  const values = new Set<string>()
  for (const expression of expressions) {
    const text = toText(compileDataTemplate(expression).render(lookup, budget))
    if (text !== '' && rendersData(expression, lookup)) values.add(text)
  }
  return [...values]
}

export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`
  if (value !== null && typeof value === 'object') {
    const record = value as Record<string, unknown>
    const keys = Object.keys(record).sort()
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(record[k])}`).join(',')}}`
  }
  return JSON.stringify(value) ?? 'null'
}
