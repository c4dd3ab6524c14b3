import type { FieldErrors } from '../../errors/index.js'
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

export class FieldErrorList {
  // No prototype: a field named after a caller's key (`constructor`) must not find Object.prototype's.
  readonly fields: FieldErrors = Object.create(null) as FieldErrors

  add(field: string, message: string): void {
    ;(this.fields[field] ??= []).push(message)
  }
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** Adds `is not allowed` for every key outside `allowed`; returns false when `data` is not an object. */
export function checkObject(data: unknown, allowed: readonly string[], errors: FieldErrorList): data is Record<string, unknown> {
  if (!isRecord(data)) {
    errors.add('data', `must be an object with ${allowed.join(', ')}`)
    return false
  }
  for (const key of Object.keys(data)) if (!allowed.includes(key)) errors.add(`data.${key}`, 'is not allowed')
  return true
}

/** The string at `field`, or null after recording why there is none. */
export function requireString(value: unknown, field: string, errors: FieldErrorList): string | null {
  if (value === undefined || value === null) errors.add(field, 'is required')
  else if (typeof value !== 'string') errors.add(field, 'must be a string')
  else return value
  return null
}

export const identity = (data: unknown): unknown => data
