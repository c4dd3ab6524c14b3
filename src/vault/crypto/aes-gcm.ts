import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto'

export type DecryptFailure = 'unknown_key' | 'malformed' | 'authentication'

/**
 * Data that cannot be decrypted: the master key id is not configured, the stored bytes are not
 * a sealed box, or authentication failed (wrong key, tampered bytes, or a ciphertext moved to
 * another row). The message never includes key material or plaintext.
 */
export class DecryptError extends Error {
  constructor(
    readonly reason: DecryptFailure,
    message: string,
  ) {
    super(message)
    this.name = 'DecryptError'
  }
}

// Sealed box layout: version (1) | iv (12) | tag (16) | ciphertext. The version byte lets a
// later format coexist with rows written by this one.
const VERSION = 1
const IV_BYTES = 12
const TAG_BYTES = 16
const HEADER_BYTES = 1 + IV_BYTES + TAG_BYTES
export const KEY_BYTES = 32

/** AES-256-GCM with a fresh random 96-bit IV per call. */
export function seal(key: Uint8Array, plaintext: Uint8Array, aad: Uint8Array): Buffer {
  const iv = randomBytes(IV_BYTES)
  const cipher = createCipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES })
  cipher.setAAD(aad)
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()])
  return Buffer.concat([Buffer.of(VERSION), iv, cipher.getAuthTag(), body])
}

export function open(key: Uint8Array, sealed: Uint8Array, aad: Uint8Array): Buffer {
  if (sealed.length < HEADER_BYTES || sealed[0] !== VERSION) throw new DecryptError('malformed', 'the ciphertext is not in a known format')
  const box = Buffer.from(sealed.buffer, sealed.byteOffset, sealed.byteLength)
  const decipher = createDecipheriv('aes-256-gcm', key, box.subarray(1, 1 + IV_BYTES), { authTagLength: TAG_BYTES })
  decipher.setAAD(aad)
  decipher.setAuthTag(box.subarray(1 + IV_BYTES, HEADER_BYTES))
  try {
    return Buffer.concat([decipher.update(box.subarray(HEADER_BYTES)), decipher.final()])
  } catch (err) {
    throw Object.assign(new DecryptError('authentication', 'the ciphertext failed authentication'), { cause: err })
  }
}

/**
 * Unambiguous additional data: each field length-prefixed, so ("ab", "c") and ("a", "bc")
 * can never produce the same bytes.
 */
export function encodeFields(fields: readonly string[]): Buffer {
  const parts: Buffer[] = []
  for (const field of fields) {
    const bytes = Buffer.from(field, 'utf8')
    const length = Buffer.alloc(4)
    length.writeUInt32BE(bytes.length)
    parts.push(length, bytes)
  }
  return Buffer.concat(parts)
}
