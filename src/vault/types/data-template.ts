import type { FieldErrors } from '../../errors/index.js'
import { compileValue, ExpressionError, RenderBudget, type CompiledValue, type TokenLookup } from '../../expressions/index.js'

const ROOT = 'data'

/**
 * Resolves the references a mask or fingerprint expression may make: `data`, or
 * `data.<key>...` walking own properties (and array indexes) of the token's data. Anything
 * else is refused, since these templates must never reach another token.
 */
export function dataLookup(data: unknown): TokenLookup {
  return (ref) => {
    const keys = dataPath(ref)
    if (keys === null) throw new ExpressionError(0, unknownReference(ref))
    let current = data
    for (const key of keys) {
      if (current === null || typeof current !== 'object' || !Object.hasOwn(current, key)) return null
      current = (current as Record<string, unknown>)[key]
    }
    return current
  }
}

/** The keys below `data` that `ref` names, or null when it is not a data reference. */
function dataPath(ref: string): string[] | null {
  if (ref === ROOT) return []
  if (!ref.startsWith(`${ROOT}.`)) return null
  const keys = ref.slice(ROOT.length + 1).split('.')
  return keys.includes('') ? null : keys
}

/**
 * Parses a mask or fingerprint expression once and checks every reference, so a bad template
 * is a 400 when it is saved rather than a failure each time a token is read.
 */
export function compileDataTemplate(template: unknown): CompiledValue {
  return compileValue(template, { maxTokens: Number.POSITIVE_INFINITY, checkReference })
}

function checkReference(ref: string): string | null {
  return dataPath(ref) === null ? unknownReference(ref) : null
}

const NO_DATA_REFERENCE = 'must refer to the token data ({{ data }} or {{ data.<field> }}): literal text alone would match values the token does not hold'

function unknownReference(ref: string): string {
  return `unknown reference ${JSON.stringify(ref)}; only data and data.<field> may be used here`
}

/**
 * Field errors for a client-supplied mask, fingerprint expression or search index, under
 * `field`. `mustReferToData` (fingerprint expressions and search indexes): at least one
 * expression must reference the data, judged on the parse tree. Equality tests of literal text
 * alone match a value the token does not hold: a token planted with `4242424242424242` as its
 * expression was returned to every search and deduplicating create of that number.
 */
export function validateDataTemplate(template: unknown, field: string, options: { mustReferToData?: boolean } = {}): FieldErrors {
  try {
    const compiled = compileDataTemplate(template)
    if (options.mustReferToData && compiled.tokenIds.size === 0) return { [field]: [NO_DATA_REFERENCE] }
    return {}
  } catch (err) {
    if (err instanceof ExpressionError) return { [field]: [err.message] }
    throw err
  }
}

/**
 * What masks, fingerprints and search indexes may render from `data`: twice its size and 1,024
 * characters of their own. Enough for any sensible template (each reference shows a part of the
 * data or a window onto it); a template of many references to large data is stopped early.
 */
export function dataRenderBudget(data: unknown): RenderBudget {
  return new RenderBudget(1024 + 2 * (typeof data === 'string' ? data.length : (JSON.stringify(data)?.length ?? 0)))
}

/** The template evaluated against `data`. Throws ExpressionError when a filter cannot apply or it renders past `dataRenderBudget`. */
export function renderDataTemplate(template: unknown, data: unknown): unknown {
  return compileDataTemplate(template).render(dataLookup(data), dataRenderBudget(data))
}
