export { DecryptError, type DecryptFailure } from './aes-gcm.js'
export { generateMasterKey, Keyring, type KeyCheckResult, type MasterKeyInput } from './keyring.js'
export { DEFAULT_KEY_ID, KeyringError, parseKeyring } from './parse-keyring.js'
export {
  dataAad,
  decryptData,
  encryptData,
  needsRewrap,
  openData,
  unwrapDataKey,
  rewrapDataKey,
  rewrapSecret,
  unwrapSecret,
  wrapSecret,
  type EncryptedData,
  type StoredData,
  type StoredKey,
  type TokenBinding,
  type WrappedKey,
} from './envelope.js'
export { generateHashSecret, HASH_SECRET_BYTES, HASH_SECRET_PURPOSE, TokenDataHasher } from './token-data-hasher.js'
