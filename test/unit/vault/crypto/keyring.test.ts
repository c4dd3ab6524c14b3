import { randomBytes } from 'node:crypto'
import { inspect } from 'node:util'
import t from 'tap'
import { generateMasterKey, Keyring, KeyringError, parseKeyring } from '../../../../src/vault/crypto/index.js'

const b64 = (bytes: number) => randomBytes(bytes).toString('base64')

function problemsOf(raw: string): string[] {
  try {
    parseKeyring(raw)
  } catch (err) {
    if (err instanceof KeyringError) return err.problems
    throw err
  }
  throw new Error('expected a KeyringError')
}

t.test('a single bare key gets id k1', async (t) => {
  const ring = parseKeyring(b64(32))
  t.equal(ring.primaryId, 'k1')
  t.same(ring.ids, ['k1'])
})

t.test('several keys with ids: the first encrypts, all are known', async (t) => {
  const ring = parseKeyring(` k2:${b64(32)} , k1:${b64(32)}\n`)
  t.equal(ring.primaryId, 'k2')
  t.same(ring.ids, ['k2', 'k1'])
  t.ok(ring.has('k1'))
  t.notOk(ring.has('k3'))
  t.equal(parseKeyring(`only:${b64(32)}`).primaryId, 'only')
})

t.test('generateMasterKey produces a value parseKeyring accepts', async (t) => {
  const value = generateMasterKey()
  t.match(value, /^k1:[A-Za-z0-9+/]{43}=$/)
  t.equal(parseKeyring(value).primaryId, 'k1')
  t.equal(parseKeyring(generateMasterKey('2026-01')).primaryId, '2026-01')
  t.not(generateMasterKey(), generateMasterKey())
  t.throws(() => generateMasterKey('bad id'))
})

t.test('every problem is reported at once, without the key', async (t) => {
  const short = b64(16)
  const raw = [`k1:${short}`, `k2:not*base64`, '', `bad id:${b64(32)}`, `k1:${b64(32)}`, `k5:${b64(32).slice(0, -1)}`].join(',')
  const problems = problemsOf(raw)
  t.same(problems, [
    'entry 1 (k1): the key decodes to 16 bytes; a master key must be 32 bytes',
    'entry 2 (k2): the key is not valid base64 (standard alphabet, with = padding)',
    'entry 3 is empty',
    'entry 4: the key id must be 1-64 characters of [A-Za-z0-9_.-]',
    'entry 6 (k5): the key is not valid base64 (standard alphabet, with = padding)',
  ])
  try {
    parseKeyring(raw)
  } catch (err) {
    t.notMatch((err as Error).message, short)
    t.match((err as Error).message, /^invalid master key setting: entry 1/)
  }
})

t.test('duplicate ids', async (t) => {
  t.same(problemsOf(`k1:${b64(32)},k1:${b64(32)}`), ['entry 2: key id k1 is used more than once'])
})

t.test('several keys need ids', async (t) => {
  t.same(problemsOf(`${b64(32)},k2:${b64(32)}`), ['entry 1 has no id; write <id>:<base64 key> when listing several keys'])
})

t.test('malformed values', async (t) => {
  t.same(problemsOf(''), ['entry 1 is empty'])
  t.same(problemsOf('   '), ['entry 1 is empty'])
  t.same(problemsOf(`k1:`), ['entry 1 (k1): the key is not valid base64 (standard alphabet, with = padding)'])
  t.same(problemsOf(b64(31)), ['entry 1 (k1): the key decodes to 31 bytes; a master key must be 32 bytes'])
  t.same(problemsOf(b64(33)), ['entry 1 (k1): the key decodes to 33 bytes; a master key must be 32 bytes'])
  const urlSafe = Buffer.alloc(32, 0xfb).toString('base64url')
  t.match(problemsOf(urlSafe)[0], /not valid base64/, 'base64url is refused')
  t.match(problemsOf(randomBytes(32).toString('hex'))[0], /decodes to 48 bytes/)
  t.match(problemsOf(`:${b64(32)}`)[0], /key id must be/)
  const keyAsId = b64(32)
  t.notMatch(problemsOf(`${keyAsId}:${b64(32)},k2:${b64(32)}`).join(), keyAsId.slice(0, 10), 'an id that fails the pattern is not echoed')
})

t.test('the Keyring constructor checks its input', async (t) => {
  t.throws(() => new Keyring([]), /at least one/)
  t.throws(() => new Keyring([{ id: 'k1', key: randomBytes(16) }]), /32 bytes/)
  t.throws(() => new Keyring([{ id: 'k 1', key: randomBytes(32) }]), /id/)
  t.throws(() => new Keyring([{ id: 'k1', key: randomBytes(32) }, { id: 'k1', key: randomBytes(32) }]), /twice/)
})

t.test('key check values detect a different key under the same id', async (t) => {
  const a = randomBytes(32)
  const ring = new Keyring([{ id: 'k1', key: a }])
  const recorded = ring.checkValues()
  t.match(recorded.k1, /^[A-Za-z0-9_-]{43}$/)
  t.notMatch(recorded.k1, a.toString('base64url'))
  t.same(new Keyring([{ id: 'k1', key: Buffer.from(a) }]).verifyCheckValues(recorded), { mismatched: [], missing: [] })
  t.same(new Keyring([{ id: 'k1', key: randomBytes(32) }]).verifyCheckValues(recorded), { mismatched: ['k1'], missing: [] })
  t.same(new Keyring([{ id: 'k2', key: a }]).verifyCheckValues(recorded), { mismatched: [], missing: ['k1'] })
  const rotated = new Keyring([{ id: 'k2', key: randomBytes(32) }, { id: 'k1', key: a }])
  t.same(rotated.verifyCheckValues(recorded), { mismatched: [], missing: [] }, 'a new key alongside is fine')
})

t.test('a keyring never shows its keys', async (t) => {
  const key = randomBytes(32)
  const ring = new Keyring([{ id: 'k1', key }])
  const shown = [inspect(ring, { showHidden: true, depth: 5 }), JSON.stringify(ring), String(Object.values(ring))]
  for (const text of shown) {
    t.notMatch(text, key.toString('base64'))
    t.notMatch(text, key.toString('hex'))
  }
  t.equal(JSON.stringify(ring), '{"ids":["k1"],"primaryId":"k1"}')
})
