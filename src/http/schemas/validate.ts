import { Ajv, type ErrorObject } from 'ajv'
import addFormats from 'ajv-formats'
import type { Static, TSchema } from '@sinclair/typebox'
import { ValidationError, type FieldErrors } from '../../errors/index.js'

const ajv = new Ajv({ allErrors: true, strict: false, useDefaults: true, coerceTypes: false })
addFormats.default(ajv, ['date-time', 'uuid'])

const queryAjv = new Ajv({ allErrors: true, strict: false, useDefaults: true, coerceTypes: 'array' })
addFormats.default(queryAjv, ['date-time', 'uuid'])

/** Compiles a schema once; the returned function narrows `unknown` to the schema's type or throws a 400. */
export function validator<S extends TSchema>(schema: S, options: { query?: boolean } = {}): (value: unknown) => Static<S> {
  const validate = (options.query ? queryAjv : ajv).compile<Static<S>>(schema)
  return (value) => {
    if (validate(value)) return value
    throw new ValidationError(toFieldErrors(validate.errors ?? []))
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
