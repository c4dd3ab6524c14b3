import { fullFormats } from 'ajv-formats/dist/formats.js'

const rfc3339 = (fullFormats['date-time'] as { validate: (value: string) => boolean }).validate

/**
 * RFC 3339, and an instant every store can hold: a leap second (`23:59:60`) is valid RFC 3339
 * but no valid JS Date (it reached the database as an invalid date: a 500), and PGlite refuses
 * year 0 and years past 9999 (`9999-12-31T23:59:59-23:59` is one; a 500 there only), which
 * `toISOString` writes with a sign and six digits. Here, not in http/schemas/, so that the vault
 * checks the expiry of a token inside /tokenize (which has no schema) by the same rule.
 */
export function isStorableDateTime(value: string): boolean {
  return rfc3339(value) && isStorableInstant(Date.parse(value))
}

/** A time (ms since the epoch) in the years 1 to 9999 UTC, which both stores hold. */
export function isStorableInstant(time: number): boolean {
  if (!Number.isFinite(time)) return false
  const year = new Date(time).getUTCFullYear()
  return year >= 1 && year <= 9999
}

/**
 * A value read from a timestamp column that holds a time: `infinity` comes back from both
 * drivers as a number, a year no Date can hold (past 275760; from PGlite, before year 1) as an
 * invalid Date.
 */
export const isInstant = (at: unknown): at is Date => at instanceof Date && !Number.isNaN(at.getTime())
