import { randomBytes } from 'node:crypto'
import t from 'tap'
import {
  DecryptError,
  decryptData,
  encryptData,
  Keyring,
  needsRewrap,
  rewrapDataKey,
  rewrapSecret,
  unwrapSecret,
  wrapSecret,
} from '../../../../src/vault/crypto/index.js'

const k1 = { id: 'k1', key: randomBytes(32) }
const k2 = { id: 'k2', key: randomBytes(32) }
const ring = new Keyring([k1])
const row = { tenantId: 'tenant-a', tokenId: 'tok_1' }
const card = { number: '4242424242424242', expiration_month: 12, expiration_year: 2030 }

function decryptFailure(fn: () => unknown): DecryptError {
  try {
    fn()
  } catch (err) {
    if (err instanceof DecryptError) return err
    throw err
  }
  throw new Error('expected a DecryptError')
}

t.test('round trip of any JSON value', async (t) => {
  for (const data of [card, 'text', 42, true, null, [1, { a: 'ü' }], { nested: { deep: ['x'] } }]) {
    const enc = encryptData(data, row, ring)
    t.equal(enc.keyId, 'k1')
    t.same(decryptData(enc, row, ring), data)
  }
})

t.test('the stored bytes hold no plaintext and differ every time', async (t) => {
  const a = encryptData(card, row, ring)
  const b = encryptData(card, row, ring)
  t.notOk(a.ciphertext.toString('latin1').includes('4242424242424242'))
  t.notSame(a.ciphertext, b.ciphertext)
  t.notSame(a.encryptedKey, b.encryptedKey, 'a fresh data key per token')
  t.equal(a.encryptedKey.length, 1 + 12 + 16 + 32)
})

t.test('bytes as Uint8Array (PGlite) decrypt too', async (t) => {
  const enc = encryptData(card, row, ring)
  const stored = { keyId: enc.keyId, encryptedKey: new Uint8Array(enc.encryptedKey), ciphertext: new Uint8Array(enc.ciphertext) }
  t.same(decryptData(stored, row, ring), card)
})

t.test('a ciphertext moved to another row fails', async (t) => {
  const enc = encryptData(card, row, ring)
  t.equal(decryptFailure(() => decryptData(enc, { ...row, tokenId: 'tok_2' }, ring)).reason, 'authentication')
  t.equal(decryptFailure(() => decryptData(enc, { ...row, tenantId: 'tenant-b' }, ring)).reason, 'authentication')
  const other = encryptData(card, { ...row, tokenId: 'tok_2' }, ring)
  const swapped = { ...enc, ciphertext: other.ciphertext }
  t.equal(decryptFailure(() => decryptData(swapped, row, ring)).reason, 'authentication', 'data from another row under this key')
  const both = { ...other }
  t.equal(decryptFailure(() => decryptData(both, row, ring)).reason, 'authentication', 'key and data moved together')
})

t.test('field boundaries in the bound data cannot be shifted', async (t) => {
  const enc = encryptData(card, { tenantId: 'ab', tokenId: 'cde' }, ring)
  t.equal(decryptFailure(() => decryptData(enc, { tenantId: 'abc', tokenId: 'de' }, ring)).reason, 'authentication')
})

t.test('the wrong master key fails', async (t) => {
  const enc = encryptData(card, row, ring)
  const wrong = new Keyring([{ id: 'k1', key: randomBytes(32) }])
  const err = decryptFailure(() => decryptData(enc, row, wrong))
  t.equal(err.reason, 'authentication')
  t.notMatch(err.message, '4242')
  t.equal(decryptFailure(() => decryptData(enc, row, new Keyring([k2]))).reason, 'unknown_key')
  t.match(decryptFailure(() => decryptData(enc, row, new Keyring([k2]))).message, 'master key k1 is not configured')
})

t.test('a wrapped key relabelled with another key id fails', async (t) => {
  const both = new Keyring([k1, { id: 'k1-copy', key: k1.key }])
  const enc = encryptData(card, row, both)
  t.equal(decryptFailure(() => decryptData({ ...enc, keyId: 'k1-copy' }, row, both)).reason, 'authentication')
})

t.test('tampered or truncated bytes fail', async (t) => {
  const enc = encryptData(card, row, ring)
  const flipped = Buffer.from(enc.ciphertext)
  flipped[flipped.length - 1] = (flipped[flipped.length - 1] as number) ^ 1
  t.equal(decryptFailure(() => decryptData({ ...enc, ciphertext: flipped }, row, ring)).reason, 'authentication')
  const badKey = Buffer.from(enc.encryptedKey)
  badKey[20] = (badKey[20] as number) ^ 1
  t.equal(decryptFailure(() => decryptData({ ...enc, encryptedKey: badKey }, row, ring)).reason, 'authentication')
  t.equal(decryptFailure(() => decryptData({ ...enc, ciphertext: enc.ciphertext.subarray(0, 10) }, row, ring)).reason, 'malformed')
  const version = Buffer.from(enc.ciphertext)
  version[0] = 9
  t.equal(decryptFailure(() => decryptData({ ...enc, ciphertext: version }, row, ring)).reason, 'malformed')
})

t.test('undefined and functions are not JSON', async (t) => {
  t.throws(() => encryptData(undefined, row, ring), TypeError)
  t.throws(() => encryptData(() => 1, row, ring), TypeError)
})

t.test('rotation: prepend a key, rewrap, drop the old key', async (t) => {
  const enc = encryptData(card, row, ring)
  const rotated = new Keyring([k2, k1])
  t.ok(needsRewrap(enc, rotated))
  t.same(decryptData(enc, row, rotated), card, 'old rows still read before rewrap')
  const rewrapped = rewrapDataKey(enc, row, rotated)
  t.equal(rewrapped.keyId, 'k2')
  t.notOk(needsRewrap(rewrapped, rotated))
  const updated = { ...enc, ...rewrapped }
  t.same(decryptData(updated, row, new Keyring([k2])), card, 'the ciphertext is untouched, only the key is rewrapped')
  t.equal(decryptFailure(() => rewrapDataKey(enc, { ...row, tokenId: 'other' }, rotated)).reason, 'authentication')
  const again = rewrapDataKey(rewrapped, row, rotated)
  t.equal(again.keyId, 'k2', 'rewrapping twice is harmless (resumable)')
  t.same(decryptData({ ...enc, ...again }, row, rotated), card)
})

t.test('secrets are wrapped per purpose and rotate', async (t) => {
  const secret = randomBytes(32)
  const wrapped = wrapSecret(secret, 'keyed-hash', ring)
  t.same(unwrapSecret(wrapped, 'keyed-hash', ring), secret)
  t.equal(decryptFailure(() => unwrapSecret(wrapped, 'other', ring)).reason, 'authentication')
  const rotated = new Keyring([k2, k1])
  const rewrapped = rewrapSecret(wrapped, 'keyed-hash', rotated)
  t.equal(rewrapped.keyId, 'k2')
  t.same(unwrapSecret(rewrapped, 'keyed-hash', new Keyring([k2])), secret)
  t.throws(() => wrapSecret(randomBytes(16), 'short', ring))
})
