import type { Logger } from 'pino'
import { AppError } from '../errors/index.js'
import type { Store } from '../store/index.js'
import {
  DecryptError,
  generateHashSecret,
  HASH_SECRET_PURPOSE,
  TokenDataHasher,
  parseKeyring,
  rewrapSecret,
  unwrapSecret,
  wrapSecret,
  type Keyring,
} from './crypto/index.js'

const CHECK_VALUES = 'master_key_check_values'
const HASH_SECRET = 'hash_secret'

export type VaultKeys =
  | { ready: true; keyring: Keyring; hasher: TokenDataHasher }
  | { ready: false; reason: string }

interface StoredSecret {
  keyId: string
  encryptedKey: string
}

/**
 * Opens the keyring against what the database recorded. A server started with the wrong master
 * key must never write with it: it comes up with the vault unavailable (token routes 503,
 * `/readyz` down) instead of encrypting new data under a key the old data does not share.
 */
export async function openVaultKeys(store: Store, masterKey: string, logger: Logger): Promise<VaultKeys> {
  const keyring = parseKeyring(masterKey)
  const recorded = await store.meta.get(CHECK_VALUES)
  if (recorded) {
    const check = keyring.verifyCheckValues(JSON.parse(recorded) as Record<string, string>)
    if (check.mismatched.length) {
      logger.error({ key_ids: check.mismatched }, 'SVC_MASTER_KEY does not match the key this database was encrypted with; the vault is unavailable')
      return { ready: false, reason: `master key ${check.mismatched.join(', ')} does not match the database` }
    }
    if (check.missing.length) logger.warn({ key_ids: check.missing }, 'master keys recorded earlier are not configured; tokens under them cannot be read')
  }
  const values = { ...(recorded ? (JSON.parse(recorded) as Record<string, string>) : {}), ...keyring.checkValues() }
  await store.meta.set(CHECK_VALUES, JSON.stringify(values))
  const hasher = new TokenDataHasher(await loadHashSecret(store, keyring))
  return { ready: true, keyring, hasher }
}

/** The keyed-hash secret, generated once and stored wrapped under the master key. */
async function loadHashSecret(store: Store, keyring: Keyring): Promise<Buffer> {
  const raw = await store.meta.get(HASH_SECRET)
  if (raw) {
    const stored = JSON.parse(raw) as StoredSecret
    const wrapped = { keyId: stored.keyId, encryptedKey: Buffer.from(stored.encryptedKey, 'base64') }
    return unwrapSecret(wrapped, HASH_SECRET_PURPOSE, keyring)
  }
  const secret = generateHashSecret()
  const wrapped = wrapSecret(secret, HASH_SECRET_PURPOSE, keyring)
  await store.meta.set(HASH_SECRET, JSON.stringify({ keyId: wrapped.keyId, encryptedKey: wrapped.encryptedKey.toString('base64') }))
  return secret
}

/**
 * Proves the keyring opens this database before a rotation touches or reports anything: each
 * configured key matches the check value recorded for its id, and the stored hash secret
 * unwraps. Without it a wrong key whose id is already the primary one finds nothing to re-wrap
 * and reports success.
 */
export async function checkMasterKeys(store: Store, keyring: Keyring): Promise<void> {
  const recorded = await store.meta.get(CHECK_VALUES)
  const mismatched = recorded ? keyring.verifyCheckValues(JSON.parse(recorded) as Record<string, string>).mismatched : []
  if (mismatched.length) throw new DecryptError('authentication', `master key ${mismatched.join(', ')} does not match the key this database was encrypted with`)
  const raw = await store.meta.get(HASH_SECRET)
  if (!raw) return
  const stored = JSON.parse(raw) as StoredSecret
  try {
    unwrapSecret({ keyId: stored.keyId, encryptedKey: Buffer.from(stored.encryptedKey, 'base64') }, HASH_SECRET_PURPOSE, keyring).fill(0)
  } catch (err) {
    if (err instanceof DecryptError && err.reason === 'authentication') {
      throw new DecryptError('authentication', `master key ${stored.keyId} does not open this database (the keyed-hash secret stored under it does not decrypt)`)
    }
    throw err
  }
}

/** Re-wraps the hash secret under the primary key (part of a master-key rotation). */
export async function rewrapHashSecret(store: Store, keyring: Keyring): Promise<void> {
  const raw = await store.meta.get(HASH_SECRET)
  if (!raw) return
  const stored = JSON.parse(raw) as StoredSecret
  if (stored.keyId === keyring.primaryId) return
  const next = rewrapSecret({ keyId: stored.keyId, encryptedKey: Buffer.from(stored.encryptedKey, 'base64') }, HASH_SECRET_PURPOSE, keyring)
  await store.meta.set(HASH_SECRET, JSON.stringify({ keyId: next.keyId, encryptedKey: next.encryptedKey.toString('base64') }))
}

export function requireReady(keys: VaultKeys): { keyring: Keyring; hasher: TokenDataHasher } {
  if (!keys.ready) throw new AppError('unavailable', { detail: 'The vault is unavailable: the configured master key does not match the database.' })
  return keys
}
