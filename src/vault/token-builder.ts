import { randomUUID } from 'node:crypto'
import { isValidContainer } from '../auth/access-rules.js'
import { ValidationError, type FieldErrors } from '../errors/index.js'
import { tokenIdProblem } from '../expressions/index.js'
import type { TokenRecord } from '../store/index.js'
import { encryptData, type TokenDataHasher, type Keyring } from './crypto/index.js'
import { canonicalJson, fingerprintInput, getTokenType, maskProblems, searchIndexValues, validateDataTemplate, type TokenTypeName } from './types/index.js'

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
  if (fields.fingerprint_expression) Object.assign(errors, validateDataTemplate(fields.fingerprint_expression, 'fingerprint_expression'))
  fields.search_indexes?.forEach((expr, i) => Object.assign(errors, validateDataTemplate(expr, `search_indexes[${i}]`)))
  if (fields.expires_at && new Date(fields.expires_at).getTime() <= Date.now()) add('expires_at', 'must be in the future')
  return errors
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
  const canonical = fingerprintInput(type, fields.data, fingerprintExpression ?? undefined)
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
    search_indexes: searchIndexes,
    search_hashes: searchIndexValues(fields.data, searchIndexes).map((v) => crypto.hasher.searchIndexHash(tenantId, v)),
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
