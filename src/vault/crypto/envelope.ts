import { randomBytes } from 'node:crypto'
import { DecryptError, encodeFields, KEY_BYTES, open, seal } from './aes-gcm.js'
import type { Keyring } from './keyring.js'

/** The row a ciphertext belongs to. Bound as additional data, so a moved ciphertext fails. */
export interface TokenBinding {
  tenantId: string
  tokenId: string
}

/** A key sealed under the master key `keyId`. */
export interface WrappedKey {
  keyId: string
  encryptedKey: Buffer
}

/** What a token row stores instead of its data. */
export interface EncryptedData extends WrappedKey {
  ciphertext: Buffer
}

/** Stored bytes as a driver returns them (Buffer from pg, Uint8Array from PGlite). */
export interface StoredKey {
  keyId: string
  encryptedKey: Uint8Array
}

export interface StoredData extends StoredKey {
  ciphertext: Uint8Array
}

const DATA_LABEL = 'tessera/token-data/v1'
const DATA_KEY_LABEL = 'tessera/data-key/v1'
const SECRET_LABEL = 'tessera/secret/v1'

/**
 * Envelope encryption: a fresh data key per token encrypts the JSON-serialized data, and the
 * master key encrypts only the data key, so rotating the master key re-wraps 32 bytes per
 * row instead of re-encrypting data.
 */
export function encryptData(data: unknown, binding: TokenBinding, keyring: Keyring): EncryptedData {
  const json = JSON.stringify(data)
  if (json === undefined) throw new TypeError('token data must be a JSON value')
  const dataKey = randomBytes(KEY_BYTES)
  try {
    const ciphertext = seal(dataKey, Buffer.from(json, 'utf8'), dataAad(binding))
    return Object.assign(wrap(dataKey, dataKeyContext(binding), keyring), { ciphertext })
  } finally {
    dataKey.fill(0)
  }
}

export function decryptData(stored: StoredData, binding: TokenBinding, keyring: Keyring): unknown {
  const dataKey = unwrapDataKey(stored, binding, keyring)
  try {
    return openData(dataKey, stored.ciphertext, dataAad(binding))
  } finally {
    dataKey.fill(0)
  }
}

/** The token's data key, for callers that keep it briefly (see the vault's token cache). */
export function unwrapDataKey(stored: StoredKey, binding: TokenBinding, keyring: Keyring): Buffer {
  return unwrap(stored, dataKeyContext(binding), keyring)
}

/** `aad` is dataAad() of the token's binding: a caller that opens one token often computes it once. */
export function openData(dataKey: Uint8Array, ciphertext: Uint8Array, aad: Uint8Array): unknown {
  return JSON.parse(open(dataKey, ciphertext, aad).toString('utf8'))
}

/** The same data key wrapped under the keyring's primary key; the ciphertext is untouched. */
export function rewrapDataKey(stored: StoredKey, binding: TokenBinding, keyring: Keyring): WrappedKey {
  return rewrap(stored, dataKeyContext(binding), keyring)
}

/** Whether a row still names a master key other than the primary one. */
export function needsRewrap(stored: { keyId: string }, keyring: Keyring): boolean {
  return stored.keyId !== keyring.primaryId
}

/**
 * Service-wide secrets (such as the keyed-hash secret) stored in the database under the master
 * key. `purpose` is bound as additional data so one secret cannot stand in for another.
 */
export function wrapSecret(secret: Uint8Array, purpose: string, keyring: Keyring): WrappedKey {
  return wrap(secret, [SECRET_LABEL, purpose], keyring)
}

export function unwrapSecret(stored: StoredKey, purpose: string, keyring: Keyring): Buffer {
  return unwrap(stored, [SECRET_LABEL, purpose], keyring)
}

export function rewrapSecret(stored: StoredKey, purpose: string, keyring: Keyring): WrappedKey {
  return rewrap(stored, [SECRET_LABEL, purpose], keyring)
}

/** The additional data a token's ciphertext is bound to: its row. */
export function dataAad(binding: TokenBinding): Buffer {
  return encodeFields([DATA_LABEL, binding.tenantId, binding.tokenId])
}

function dataKeyContext(binding: TokenBinding): string[] {
  return [DATA_KEY_LABEL, binding.tenantId, binding.tokenId]
}

// The master key id is part of the additional data, so a wrapped key relabelled with another
// id fails even if that id's key were the same bytes.
function wrap(key: Uint8Array, context: string[], keyring: Keyring): WrappedKey {
  if (key.length !== KEY_BYTES) throw new TypeError(`only ${KEY_BYTES}-byte keys are wrapped`)
  const { keyId, sealed } = keyring.seal(key, (id) => encodeFields([...context, id]))
  return { keyId, encryptedKey: sealed }
}

function unwrap(stored: StoredKey, context: string[], keyring: Keyring): Buffer {
  const key = keyring.open(stored.keyId, stored.encryptedKey, encodeFields([...context, stored.keyId]))
  if (key.length !== KEY_BYTES) throw new DecryptError('malformed', 'the wrapped key has the wrong length')
  return key
}

function rewrap(stored: StoredKey, context: string[], keyring: Keyring): WrappedKey {
  const key = unwrap(stored, context, keyring)
  try {
    return wrap(key, context, keyring)
  } finally {
    key.fill(0)
  }
}
