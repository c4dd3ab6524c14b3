import { Ajv, type ErrorObject } from 'ajv'
import addFormats from 'ajv-formats'
import type { Static, TSchema } from '@sinclair/typebox'
import { ValidationError, type FieldErrors } from '../../errors/index.js'
import { isStorableDateTime } from '../../shapes/date-time.js'

// strictNumbers: NaN and Infinity fail number checks (behind json-body, which refuses numbers beyond
// a double; query values ajv coerces are checked after validation, see assertFiniteParameters).
const ajv = new Ajv({ allErrors: true, strict: false, useDefaults: true, coerceTypes: false, strictNumbers: true })
const queryAjv = new Ajv({ allErrors: true, strict: false, useDefaults: true, coerceTypes: 'array', strictNumbers: true })
for (const instance of [ajv, queryAjv]) {
  addFormats.default(instance, ['date-time', 'uuid'])
  instance.addFormat('date-time', { type: 'string', validate: isStorableDateTime })
}

/** Compiles a schema once; the returned function narrows `unknown` to the schema's type or throws a 400. */
export function validator<S extends TSchema>(schema: S, options: { query?: boolean } = {}): (value: unknown) => Static<S> {
  const validate = (options.query ? queryAjv : ajv).compile<Static<S>>(schema)
  const numeric = options.query ? numericParameters(schema) : []
  return (value) => {
    // Read before ajv coerces the query in place.
    const spelling = undecimalParameters(value, numeric)
    if (!validate(value) || spelling) throw new ValidationError({ ...spelling, ...toFieldErrors(validate.errors ?? []) })
    if (options.query) assertFiniteParameters(value)
    return value
  }
}

/** How each number a query schema holds (top level) must be written. */
const SPELLINGS = { integer: /^-?\d+$/, number: /^-?\d+(?:\.\d+)?$/ } as const

/** The top-level properties of a query schema that ajv coerces to numbers, with their spelling. */
function numericParameters(schema: TSchema): [string, RegExp][] {
  const properties = (schema as { properties?: Record<string, { type?: unknown }> }).properties ?? {}
  return Object.entries(properties).flatMap(([name, { type }]) => (type === 'integer' || type === 'number' ? [[name, SPELLINGS[type]] as [string, RegExp]] : []))
}

/**
 * ajv coerces any text `Number()` reads: `size=0x10` would be 16, `size=1e1` 10, `size= 5` 5
 * and `size=1.9999999999999999` 2. A number in a query is written in decimal digits (an integer
 * without a fraction); anything else is named as invalid.
 */
function undecimalParameters(query: unknown, numeric: readonly [string, RegExp][]): FieldErrors | undefined {
  if (numeric.length === 0 || query === null || typeof query !== 'object') return undefined
  const bad = numeric.filter(([name, spelling]) => [(query as Record<string, unknown>)[name]].flat().some((item) => typeof item === 'string' && !spelling.test(item)))
  return bad.length === 0 ? undefined : Object.fromEntries(bad.map(([name]) => [name, ['must be a number written in decimal digits']]))
}

/**
 * ajv coerces a query's `page=1e400` to Infinity and then skips its range checks for a number
 * that is not finite (strictNumbers or not), so a coerced parameter is checked here.
 */
function assertFiniteParameters(query: unknown): void {
  if (query === null || typeof query !== 'object') return
  for (const [name, value] of Object.entries(query)) {
    if ([value].flat().some((item) => typeof item === 'number' && !Number.isFinite(item))) throw ValidationError.field(name, 'must be a finite number')
  }
}

/** ajv's `/rules/0/priority` becomes `rules[0].priority`, the form clients see in `errors`. */
export function toFieldErrors(errors: ErrorObject[]): FieldErrors {
  // A Map, not an object: a field named `toString` or `constructor` must not find Object.prototype's.
  const out = new Map<string, string[]>()
  for (const e of errors) {
    let path = e.instancePath
      .split('/')
      .slice(1)
      .map((seg) => (/^\d+$/.test(seg) ? `[${seg}]` : `.${seg.replaceAll('~1', '/').replaceAll('~0', '~')}`))
      .join('')
      .replace(/^\./, '')
    let message = e.message ?? 'is invalid'
    if (e.keyword === 'required') {
      path = joinPath(path, String(e.params.missingProperty))
      message = 'is required'
    } else if (e.keyword === 'additionalProperties') {
      path = joinPath(path, String(e.params.additionalProperty))
      message = 'is not a known field'
    } else if (e.keyword === 'enum') {
      message = `must be one of: ${(e.params.allowedValues as unknown[]).join(', ')}`
    } else if (e.keyword === 'maxLength') {
      message = `must be at most ${String(e.params.limit)} characters`
    }
    const field = path || 'body'
    const messages = out.get(field) ?? []
    if (!messages.includes(message)) messages.push(message)
    out.set(field, messages)
  }
  return Object.fromEntries(out)
}

function joinPath(base: string, field: string): string {
  return base ? `${base}.${field}` : field
}
