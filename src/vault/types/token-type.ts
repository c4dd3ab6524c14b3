import { FieldErrorList, type FieldErrors } from '../../errors/index.js'
import { isRecord } from '../../shapes/http-parts.js'
import type { MaskLimits } from './mask-limits.js'

export type TokenTypeName =
  | 'token'
  | 'card'
  | 'card_number'
  | 'bank'
  | 'us_bank_routing_number'
  | 'social_security_number'
  | 'employer_id_number'

/**
 * What the vault knows about one token type.
 *
 * Masks and fingerprint expressions are templates over the token's own data: a mask is a JSON
 * value whose strings may hold expressions, and an expression names `data` (the whole data) or
 * `data.<key>.<key>` (a field), e.g. `{ "number": "{{ data.number | reveal_last: 4 }}" }`.
 * They reuse the request expression evaluator, so there is one grammar to learn and to test.
 */
export interface TokenType {
  name: TokenTypeName
  defaultContainer: string
  /** Field errors keyed `data` or `data.<field>`; empty when the data is valid. */
  validate(data: unknown): FieldErrors
  /** Null when the type has no mask: the `mask` transform then omits `data`. */
  defaultMask: unknown
  /** What any mask of this type may show (the default mask included); see mask-limits.ts. */
  maskLimits: MaskLimits
  defaultFingerprintExpression: string
  /**
   * The form fingerprints are computed over, so that equal values written differently (an
   * SSN with or without dashes) deduplicate. Called on valid data only.
   */
  canonicalize(data: unknown): unknown
}

/** A check of one value that records what is wrong with it under `field`. */
export type ValueCheck = (value: unknown, field: string, errors: FieldErrorList) => void

/** The `validate` of a type whose data is one value (a card number alone, as a card's `number` is checked). */
export function validateValue(check: ValueCheck): (data: unknown) => FieldErrors {
  return (data) => {
    const errors = new FieldErrorList()
    check(data, 'data', errors)
    return errors.fields
  }
}

/**
 * The `validate` of a type whose data is an object of `fields` and no others: `is not allowed`
 * for every other key, then `check` on the object's fields (`data.<field>`).
 */
export function validateObject(fields: readonly string[], check: (data: Record<string, unknown>, errors: FieldErrorList) => void): (data: unknown) => FieldErrors {
  return (data) => {
    const errors = new FieldErrorList()
    if (!isRecord(data)) {
      errors.add('data', `must be an object with ${fields.join(', ')}`)
      return errors.fields
    }
    for (const key of Object.keys(data)) if (!fields.includes(key)) errors.add(`data.${key}`, 'is not allowed')
    check(data, errors)
    return errors.fields
  }
}

/** The string at `field`, or null after recording why there is none. */
export function requireString(value: unknown, field: string, errors: FieldErrorList): string | null {
  if (value === undefined || value === null) errors.add(field, 'is required')
  else if (typeof value !== 'string') errors.add(field, 'must be a string')
  else return value
  return null
}

export const identity = (data: unknown): unknown => data
