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
 * `/readyz` down) instead of encrypting new data under a key the old data does not share. Check
 * values are recorded only once the keyring has proven it opens the database (the keyed-hash
 * secret unwraps): one start with a mistyped key must not lock the right one out.
 */
export async function openVaultKeys(store: Store, masterKey: string, logger: Logger): Promise<VaultKeys> {
  const keyring = parseKeyring(masterKey)
  const recorded = await store.meta.get(CHECK_VALUES)
  if (recorded) {
    const check = keyring.verifyCheckValues(JSON.parse(recorded) as Record<string, string>)
    if (check.mismatched.length) return vaultDown(logger, check.mismatched)
    if (check.missing.length) logger.warn({ key_ids: check.missing }, 'master keys recorded earlier are not configured; tokens under them cannot be read')
  }
  const secret = await loadHashSecret(store, keyring)
  if (!secret.ok) {
    logger.error({ key_id: secret.keyId }, `SVC_MASTER_KEY does not open this database (${secret.reason}); the vault is unavailable`)
    return { ready: false, reason: `master key ${secret.keyId} does not open the database: ${secret.reason}` }
  }
  const mismatched = await recordCheckValues(store, keyring)
  if (mismatched.length) {
    secret.value.fill(0)
    return vaultDown(logger, mismatched)
  }
  return { ready: true, keyring, hasher: new TokenDataHasher(secret.value) }
}

function vaultDown(logger: Logger, keyIds: string[]): VaultKeys {
  logger.error({ key_ids: keyIds }, 'SVC_MASTER_KEY does not match the key this database was encrypted with; the vault is unavailable')
  return { ready: false, reason: `master key ${keyIds.join(', ')} does not match the database` }
}

/**
 * Records the check value of every configured key whose id has none yet, keeping those recorded
 * (one statement: two processes starting together cannot overwrite each other's), and answers
 * the ids whose recorded value is not this keyring's (another process recorded another key).
 */
export async function recordCheckValues(store: Store, keyring: Keyring): Promise<string[]> {
  const stored = await store.meta.addMissingEntries(CHECK_VALUES, keyring.checkValues())
  return keyring.verifyCheckValues(stored).mismatched
}

type LoadedSecret = { ok: true; value: Buffer } | { ok: false; keyId: string; reason: string }

/**
 * The keyed-hash secret, generated once and stored wrapped under the master key. Processes
 * starting together on a new database all take the one stored first, never their own.
 */
async function loadHashSecret(store: Store, keyring: Keyring): Promise<LoadedSecret> {
  let raw = await store.meta.get(HASH_SECRET)
  if (!raw) {
    const generated = generateHashSecret()
    const wrapped = wrapSecret(generated, HASH_SECRET_PURPOSE, keyring)
    generated.fill(0)
    raw = await store.meta.setIfAbsent(HASH_SECRET, JSON.stringify({ keyId: wrapped.keyId, encryptedKey: wrapped.encryptedKey.toString('base64') }))
  }
  const stored = JSON.parse(raw) as StoredSecret
  try {
    return { ok: true, value: unwrapSecret({ keyId: stored.keyId, encryptedKey: Buffer.from(stored.encryptedKey, 'base64') }, HASH_SECRET_PURPOSE, keyring) }
  } catch (err) {
    if (!(err instanceof DecryptError)) throw err
    const reason = err.reason === 'unknown_key' ? `the keyed-hash secret is stored under ${stored.keyId}, which is not configured` : 'the keyed-hash secret stored under it does not decrypt'
    return { ok: false, keyId: stored.keyId, reason }
  }
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
