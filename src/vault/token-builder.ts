import { randomUUID } from 'node:crypto'
import { isValidContainer } from '../auth/access-rules.js'
import { ValidationError, type FieldErrors } from '../errors/index.js'
import { ExpressionError, tokenIdProblem } from '../expressions/index.js'
import { isStorableDateTime } from '../shapes/date-time.js'
import type { TokenRecord } from '../store/index.js'
import { encryptData, type TokenDataHasher, type Keyring } from './crypto/index.js'
import { canonicalJson, dataRenderBudget, fingerprintInput, getTokenType, maskProblems, searchIndexValues, testsBeyondMask, validateDataTemplate, type TokenTypeName } from './types/index.js'

/** The writable fields of a token, after schema validation. */
export interface TokenFields {
  id?: string
  type: TokenTypeName
  data: unknown
  containers?: string[]
  metadata?: Record<string, string>
  mask?: unknown
  fingerprint_expression?: string | null
  search_indexes?: string[] | null
  expires_at?: string | null
}

export interface VaultCrypto {
  keyring: Keyring
  hasher: TokenDataHasher
}

/**
 * Field errors for everything the schema cannot check: data per type, id, containers,
 * templates, what a mask may show, expiry. `checkMaskLimits` is off only for a mask an update
 * carries over unchanged (it is limited again whenever it is rendered).
 */
export function validateTokenFields(fields: TokenFields, options: { checkId: boolean; checkMaskLimits: boolean }): FieldErrors {
  const shape = shapeErrors(fields)
  if (Object.keys(shape).length) return shape
  const type = getTokenType(fields.type)
  const errors: FieldErrors = { ...type.validate(fields.data) }
  const add = (field: string, message: string) => (errors[field] ??= []).push(message)
  if (options.checkId && fields.id !== undefined) {
    const problem = tokenIdProblem(fields.id)
    if (problem) add('id', problem)
  }
  fields.containers?.forEach((c, i) => {
    if (!isValidContainer(c)) add(`containers[${i}]`, 'must start and end with / and use lower-case [a-z0-9_-] segments')
  })
  if (fields.mask !== undefined && fields.mask !== null) {
    const templateErrors = validateDataTemplate(fields.mask, 'mask')
    Object.assign(errors, templateErrors)
    if (options.checkMaskLimits && !templateErrors.mask) for (const problem of maskProblems(fields.mask, type.maskLimits, type.name)) add('mask', problem)
  }
  if (fields.fingerprint_expression) Object.assign(errors, validateDataTemplate(fields.fingerprint_expression, 'fingerprint_expression', { mustReferToData: true }))
  fields.search_indexes?.forEach((expr, i) => Object.assign(errors, validateDataTemplate(expr, `search_indexes[${i}]`, { mustReferToData: true })))
  if (fields.expires_at && new Date(fields.expires_at).getTime() <= Date.now()) add('expires_at', 'must be in the future')
  return errors
}

/** The size limits of each field: one definition, for the HTTP schema (http/schemas/tokens.ts) and `shapeErrors`. */
export const TOKEN_LIMITS = {
  containers: 10,
  containerLength: 400,
  metadataKeys: 20,
  metadataKeyLength: 100,
  metadataValueLength: 500,
  searchIndexes: 20,
  expressionLength: 500,
} as const

/**
 * The JSON shape of each field, which the HTTP schema checks for POST /tokens but nothing does
 * for the full tokens inside /tokenize or a Reactor's `tokenize`: without it a token could be
 * stored with no container at all (outside every container rule) or a request end in a 500.
 */
function shapeErrors(fields: TokenFields): FieldErrors {
  const errors: FieldErrors = {}
  const check = (field: string, ok: boolean, message: string) => ok || (errors[field] ??= []).push(message)
  const { id, containers, metadata, fingerprint_expression: expression, search_indexes: indexes, expires_at: expiresAt } = fields as Record<keyof TokenFields, unknown>
  const L = TOKEN_LIMITS
  check('id', id === undefined || typeof id === 'string', 'must be a string')
  check(
    'containers',
    containers === undefined ||
      (Array.isArray(containers) && containers.length >= 1 && containers.length <= L.containers && new Set(containers).size === containers.length && containers.every((c) => isText(c, 1, L.containerLength))),
    `must be 1 to ${L.containers} distinct containers of at most ${L.containerLength} characters`,
  )
  check(
    'metadata',
    metadata === undefined ||
      (isPlainObject(metadata) &&
        Object.keys(metadata).length <= L.metadataKeys &&
        Object.entries(metadata).every(([k, v]) => isText(k, 1, L.metadataKeyLength) && isText(v, 0, L.metadataValueLength))),
    `must be an object of at most ${L.metadataKeys} keys of 1 to ${L.metadataKeyLength} characters, each a string of at most ${L.metadataValueLength}`,
  )
  check('fingerprint_expression', expression === undefined || expression === null || isText(expression, 1, L.expressionLength), `must be a string of 1 to ${L.expressionLength} characters`)
  check(
    'search_indexes',
    indexes === undefined || indexes === null || (Array.isArray(indexes) && indexes.length <= L.searchIndexes && indexes.every((x) => isText(x, 1, L.expressionLength))),
    `must be at most ${L.searchIndexes} strings of 1 to ${L.expressionLength} characters`,
  )
  check('expires_at', expiresAt === undefined || expiresAt === null || (typeof expiresAt === 'string' && isStorableDateTime(expiresAt)), 'must be an ISO 8601 date-time')
  return errors
}

function isText(value: unknown, min: number, max: number): value is string {
  return typeof value === 'string' && value.length >= min && value.length <= max
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** The derived, encrypted row for validated fields. Plaintext leaves this function only as ciphertext and keyed hashes. */
export function buildTokenRecord(
  tenantId: string,
  fields: TokenFields,
  actor: string,
  crypto: VaultCrypto,
  existing?: TokenRecord,
): TokenRecord {
  const maskChanged = !existing || (fields.mask !== undefined && canonicalJson(fields.mask) !== canonicalJson(existing.mask))
  const errors = validateTokenFields(fields, { checkId: !existing, checkMaskLimits: maskChanged })
  if (Object.keys(errors).length) throw new ValidationError(errors)
  const type = getTokenType(fields.type)
  const id = existing?.id ?? fields.id ?? randomUUID()
  const fingerprintExpression = fields.fingerprint_expression ?? null
  const searchIndexes = fields.search_indexes ?? []
  const canonical = rendered('fingerprint_expression', () => fingerprintInput(type, fields.data, fingerprintExpression ?? undefined))
  const searchBudget = dataRenderBudget(fields.data)
  const searchValues = new Set(searchIndexes.flatMap((expression, i) => rendered(`search_indexes[${i}]`, () => searchIndexValues(fields.data, [expression], searchBudget))))
  const encrypted = encryptData(fields.data, { tenantId, tokenId: id }, crypto.keyring)
  const now = new Date()
  return {
    tenant_id: tenantId,
    id,
    type: type.name,
    containers: fields.containers ?? existing?.containers ?? [type.defaultContainer],
    metadata: fields.metadata ?? {},
    mask: fields.mask === undefined ? (existing ? existing.mask : type.defaultMask) : fields.mask,
    fingerprint: canonical === null ? null : crypto.hasher.fingerprint(tenantId, type.name, canonical),
    fingerprint_expression: fingerprintExpression,
    fingerprint_beyond_mask: fingerprintExpression !== null && testsBeyondMask(type, fingerprintExpression),
    search_indexes: searchIndexes,
    search_beyond_mask: searchIndexes.some((expression) => testsBeyondMask(type, expression)),
    search_hashes: [...searchValues].map((v) => crypto.hasher.searchIndexHash(tenantId, v)),
    key_id: encrypted.keyId,
    encrypted_key: encrypted.encryptedKey,
    ciphertext: encrypted.ciphertext,
    expires_at: fields.expires_at ? new Date(fields.expires_at) : null,
    created_by: existing ? existing.created_by : actor,
    created_at: existing ? existing.created_at : now,
    modified_by: actor,
    modified_at: now,
  }
}

/**
 * A template that compiles may still not apply to the data (`last4` of an object, `slice` of a
 * boolean), which only rendering finds: a 400 naming the field, as if it did not compile.
 */
function rendered<T>(field: string, render: () => T): T {
  try {
    return render()
  } catch (err) {
    if (err instanceof ExpressionError) throw ValidationError.field(field, err.message)
    throw err
  }
}

/**
 * What a deduplicating create of `record` looks for (`findByFingerprints`): a token of its type
 * and fingerprint made by the same effective expression (the one asked for, or the type's
 * default), so that a token whose own expression renders this value from other data (literal
 * text, another field) is never taken for it.
 */
export function wantedFingerprint(record: TokenRecord, fingerprint: string) {
  const defaultExpression = getTokenType(record.type as TokenTypeName).defaultFingerprintExpression
  return { type: record.type, fingerprint, expression: record.fingerprint_expression ?? defaultExpression, defaultExpression, until: record.expires_at }
}

/** RFC 7386 JSON merge patch. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return patch
  const out: Record<string, unknown> = target !== null && typeof target === 'object' && !Array.isArray(target) ? { ...(target as object) } : {}
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete out[key]
    else out[key] = mergePatch(out[key], value)
  }
  return out
}
