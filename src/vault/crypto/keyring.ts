import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'
import { inspect } from 'node:util'
import { DecryptError, KEY_BYTES, open, seal } from './aes-gcm.js'

export interface MasterKeyInput {
  id: string
  key: Uint8Array
}

export interface SealedWithKey {
  keyId: string
  sealed: Buffer
}

export interface KeyCheckResult {
  /** Ids configured now whose key differs from the one recorded: the wrong key. */
  mismatched: string[]
  /** Ids recorded earlier but not configured now: data under them cannot be read. */
  missing: string[]
}

export const KEY_ID_PATTERN = /^[A-Za-z0-9_.-]{1,64}$/
const KEY_CHECK_LABEL = 'tessera/key-check/v1'

/**
 * The master keys. The first one encrypts; every one decrypts, so keys rotate by prepending a
 * new one and re-wrapping. Key bytes live in a private field and never leave this class:
 * callers seal and open through it, and inspecting or serializing a Keyring shows ids only.
 */
export class Keyring {
  readonly #keys: Map<string, Buffer>
  readonly primaryId: string
  readonly ids: readonly string[]

  constructor(keys: readonly MasterKeyInput[]) {
    const first = keys[0]
    if (first === undefined) throw new Error('a keyring needs at least one master key')
    this.#keys = new Map()
    for (const { id, key } of keys) {
      if (!KEY_ID_PATTERN.test(id)) throw new Error('a master key id must be 1-64 characters of [A-Za-z0-9_.-]')
      if (key.length !== KEY_BYTES) throw new Error(`master key ${id} must be ${KEY_BYTES} bytes`)
      if (this.#keys.has(id)) throw new Error(`master key id ${id} appears twice`)
      this.#keys.set(id, Buffer.from(key))
    }
    this.primaryId = first.id
    this.ids = Object.freeze(keys.map((k) => k.id))
  }

  has(keyId: string): boolean {
    return this.#keys.has(keyId)
  }

  /** Seals under the primary key; `aad` is whatever the caller binds the result to. */
  seal(plaintext: Uint8Array, aad: (keyId: string) => Uint8Array): SealedWithKey {
    const keyId = this.primaryId
    return { keyId, sealed: seal(this.#keys.get(keyId) as Buffer, plaintext, aad(keyId)) }
  }

  open(keyId: string, sealed: Uint8Array, aad: Uint8Array): Buffer {
    const key = this.#keys.get(keyId)
    if (key === undefined) throw new DecryptError('unknown_key', `master key ${keyId} is not configured`)
    return open(key, sealed, aad)
  }

  /**
   * A value per key id that identifies the key without revealing it (an HMAC of a constant).
   * Stored once, it lets a restarted server notice it was given a different key before it
   * writes anything.
   */
  checkValues(): Record<string, string> {
    const out: Record<string, string> = {}
    for (const [id, key] of this.#keys) out[id] = createHmac('sha256', key).update(KEY_CHECK_LABEL).digest('base64url')
    return out
  }

  verifyCheckValues(recorded: Readonly<Record<string, string>>): KeyCheckResult {
    const current = this.checkValues()
    const result: KeyCheckResult = { mismatched: [], missing: [] }
    for (const [id, value] of Object.entries(recorded)) {
      const mine = current[id]
      if (mine === undefined) result.missing.push(id)
      else if (!sameText(mine, value)) result.mismatched.push(id)
    }
    return result
  }

  toJSON(): { ids: readonly string[]; primaryId: string } {
    return { ids: this.ids, primaryId: this.primaryId }
  }

  [inspect.custom](): string {
    return `Keyring { primaryId: ${this.primaryId}, ids: [${this.ids.join(', ')}] }`
  }
}

/** A new `SVC_MASTER_KEY` value (`<id>:<base64 of 32 random bytes>`), for first start. */
export function generateMasterKey(id = 'k1'): string {
  if (!KEY_ID_PATTERN.test(id)) throw new Error('a master key id must be 1-64 characters of [A-Za-z0-9_.-]')
  return `${id}:${randomBytes(KEY_BYTES).toString('base64')}`
}

function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && timingSafeEqual(x, y)
}
