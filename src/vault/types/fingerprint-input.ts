import { toText } from '../../expressions/index.js'
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
  const value = compileDataTemplate(expression).render(dataLookup(canonical), dataRenderBudget(canonical))
  if (value === null || value === '') return null
  return canonicalJson(value)
}

/**
 * The distinct values a token's `search_indexes` expressions produce over its data, as text,
 * ready for `TokenDataHasher.searchIndexHash`. Empty results are dropped: they would match every
 * token whose field is missing. All of them together share one `dataRenderBudget`.
 */
export function searchIndexValues(data: unknown, expressions: readonly string[], budget = dataRenderBudget(data)): string[] {
  const lookup = dataLookup(data)
  const values = new Set<string>()
  for (const expression of expressions) {
    const text = toText(compileDataTemplate(expression).render(lookup, budget))
    if (text !== '') values.add(text)
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
