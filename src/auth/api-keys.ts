import { createHmac, createSecretKey, randomBytes } from 'node:crypto'

/**
 * Each kind of key says what it is, so a secret scanner (or a person) that finds one in a
 * repository or a log knows its weight at once. Keys issued before these prefixes (`key_`)
 * stay valid: a key is looked up by its hash, whatever it looks like.
 */
export const KEY_PREFIXES = {
  management: 'tsr_mgmt_',
  private: 'tsr_priv_',
  public: 'tsr_pub_',
  session: 'tsr_sess_',
  proxy: 'tsr_proxy_',
} as const

export type KeyKind = keyof typeof KEY_PREFIXES

/** A new key of `kind`: its prefix + 43 base62 characters. */
export function newApiKey(kind: KeyKind): string {
  return generateApiKey(KEY_PREFIXES[kind])
}

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'
const KEY_CHARS = 43 // 43 base62 characters carry > 256 bits

/** `prefix` + 43 base62 characters from the CSPRNG (`key_` was the prefix of every key before KEY_PREFIXES). */
export function generateApiKey(prefix = 'key_'): string {
  let out = prefix
  while (out.length < prefix.length + KEY_CHARS) {
    for (const byte of randomBytes(64)) {
      // Rejection sampling keeps every character equally likely (248 = 4 * 62).
      if (byte < 248 && out.length < prefix.length + KEY_CHARS) out += ALPHABET[byte % 62]
    }
  }
  return out
}

export interface ApiKeyHasher {
  hash(key: string): string
}

/** Keys are stored only as HMAC-SHA-256 under a server secret, so a database dump reveals none. */
export function apiKeyHasher(secret: string): ApiKeyHasher {
  // The same bytes as the string (UTF-8), imported once: a string key is converted and imported
  // again by every createHmac, once per authenticated request.
  const hmacKey = createSecretKey(Buffer.from(secret, 'utf8'))
  return { hash: (key) => createHmac('sha256', hmacKey).update(key).digest('hex') }
}

/** Cheap shape check before any hashing or lookup. */
export function looksLikeKey(value: string): boolean {
  return value.length >= 8 && value.length <= 200 && /^[A-Za-z0-9_-]+$/.test(value)
}
