import { createHmac, hkdfSync, randomBytes } from 'node:crypto'
import { inspect } from 'node:util'
import { encodeFields } from './aes-gcm.js'

export const HASH_SECRET_BYTES = 32
/** The `purpose` under which the hash secret is stored with `wrapSecret`. */
// The value is stored with every wrapped secret: it keeps its old name.
export const HASH_SECRET_PURPOSE = 'keyed-hash'

/**
 * Fingerprints and search-index hashes: HMAC-SHA-256 under keys derived with HKDF from one
 * dedicated hash secret, never from a master key. Why: fingerprints drive deduplication and
 * search, so they must stay stable forever, while master keys rotate. The secret is generated
 * once (`generateHashSecret`) on first start and stored in the database wrapped under the
 * master key (`wrapSecret(secret, HASH_SECRET_PURPOSE, keyring)`); rotation re-wraps it like
 * any data key, so the derived keys, and every stored hash, are unchanged by rotation.
 * Separate HKDF labels keep a fingerprint from ever equalling a search-index hash.
 */
export class TokenDataHasher {
  readonly #fingerprintKey: Buffer
  readonly #searchKey: Buffer

  constructor(secret: Uint8Array) {
    if (secret.length < HASH_SECRET_BYTES) throw new Error(`the hash secret must be at least ${HASH_SECRET_BYTES} bytes`)
    this.#fingerprintKey = derive(secret, 'tessera/fingerprint/v1')
    this.#searchKey = derive(secret, 'tessera/search-index/v1')
  }

  /** Equal for equal (tenant, type, canonical value); tenants never share fingerprints. */
  fingerprint(tenantId: string, type: string, canonicalValue: string): string {
    return createHmac('sha256', this.#fingerprintKey).update(encodeFields([tenantId, type, canonicalValue])).digest('base64url')
  }

  searchIndexHash(tenantId: string, value: string): string {
    return createHmac('sha256', this.#searchKey).update(encodeFields([tenantId, value])).digest('base64url')
  }

  [inspect.custom](): string {
    return 'TokenDataHasher {}'
  }

  toJSON(): Record<string, never> {
    return {}
  }
}

export function generateHashSecret(): Buffer {
  return randomBytes(HASH_SECRET_BYTES)
}

function derive(secret: Uint8Array, info: string): Buffer {
  return Buffer.from(hkdfSync('sha256', secret, Buffer.alloc(0), info, 32))
}
