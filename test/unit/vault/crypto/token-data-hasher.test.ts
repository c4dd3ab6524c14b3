import { randomBytes } from 'node:crypto'
import { inspect } from 'node:util'
import t from 'tap'
import { generateHashSecret, TokenDataHasher, Keyring, rewrapSecret, unwrapSecret, wrapSecret, HASH_SECRET_PURPOSE } from '../../../../src/vault/crypto/index.js'

const secret = generateHashSecret()
const hasher = new TokenDataHasher(secret)

t.test('fingerprints are deterministic, keyed and scoped to tenant and type', async (t) => {
  const fp = hasher.fingerprint('t1', 'card', '"4242424242424242"')
  t.match(fp, /^[A-Za-z0-9_-]{43}$/)
  t.equal(fp, new TokenDataHasher(Buffer.from(secret)).fingerprint('t1', 'card', '"4242424242424242"'))
  t.not(fp, hasher.fingerprint('t2', 'card', '"4242424242424242"'))
  t.not(fp, hasher.fingerprint('t1', 'card_number', '"4242424242424242"'))
  t.not(fp, hasher.fingerprint('t1', 'card', '"4242424242424241"'))
  t.not(fp, new TokenDataHasher(generateHashSecret()).fingerprint('t1', 'card', '"4242424242424242"'))
  t.not(hasher.fingerprint('ab', 'c', 'd'), hasher.fingerprint('a', 'bc', 'd'), 'fields cannot shift')
})

t.test('search-index hashes are separate from fingerprints', async (t) => {
  const h = hasher.searchIndexHash('t1', '4242')
  t.equal(h, hasher.searchIndexHash('t1', '4242'))
  t.not(h, hasher.searchIndexHash('t2', '4242'))
  t.not(h, hasher.searchIndexHash('t1', '4243'))
  t.not(hasher.searchIndexHash('t1', 'x'), hasher.fingerprint('t1', '', 'x'))
})

t.test('master-key rotation leaves fingerprints unchanged', async (t) => {
  const k1 = { id: 'k1', key: randomBytes(32) }
  const before = new Keyring([k1])
  const stored = wrapSecret(secret, HASH_SECRET_PURPOSE, before)
  const fp = new TokenDataHasher(unwrapSecret(stored, HASH_SECRET_PURPOSE, before)).fingerprint('t', 'token', 'v')
  const during = new Keyring([{ id: 'k2', key: randomBytes(32) }, k1])
  const rewrapped = rewrapSecret(stored, HASH_SECRET_PURPOSE, during)
  t.equal(rewrapped.keyId, 'k2')
  t.equal(new TokenDataHasher(unwrapSecret(rewrapped, HASH_SECRET_PURPOSE, during)).fingerprint('t', 'token', 'v'), fp)
})

t.test('a short secret is refused and the hasher never shows its keys', async (t) => {
  t.throws(() => new TokenDataHasher(randomBytes(16)), /at least 32 bytes/)
  t.equal(inspect(hasher, { showHidden: true }), 'TokenDataHasher {}')
  t.equal(JSON.stringify(hasher), '{}')
})
