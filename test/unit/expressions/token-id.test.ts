import t from 'tap'
import { isValidTokenId, tokenIdProblem } from '../../../src/expressions/index.js'

t.test('valid ids', async (t) => {
  for (const id of ['abc', 'a'.repeat(400), 'tok_123', 'card.visa-01', '3f1c2d9e-8a4b-4c6d-9e0f-123456789abc', 'ünïcødé', 'a:b;c,d@e!f*g(h)i~j$k\'l"m']) {
    t.ok(isValidTokenId(id), id.slice(0, 40))
    t.equal(tokenIdProblem(id), null)
  }
})

t.test('length 3 to 400', async (t) => {
  t.notOk(isValidTokenId(''))
  t.notOk(isValidTokenId('ab'))
  t.notOk(isValidTokenId('a'.repeat(401)))
  t.equal(tokenIdProblem('ab'), 'must be 3 to 400 characters')
})

t.test('every forbidden character', async (t) => {
  for (const ch of '#/\\+?[]|&=%<>{}^') {
    t.notOk(isValidTokenId(`ab${ch}cd`), ch)
    t.equal(tokenIdProblem(`ab${ch}cd`), `must not contain ${JSON.stringify(ch)}`)
  }
})

t.test('whitespace and control characters, which the grammar cannot express', async (t) => {
  for (const ch of [' ', '\t', '\n', '\r', '\u0000', '\u007f', '\u00a0', '\u2028', '\u3000', '\ufeff']) {
    t.notOk(isValidTokenId(`ab${ch}cd`), `U+${ch.charCodeAt(0).toString(16)}`)
  }
})

t.test('lone surrogates, which have no UTF-8 form: stored as U+FFFD they would name another id', async (t) => {
  for (const ch of ['\ud800', '\udfff']) t.equal(tokenIdProblem(`ab${ch}cd`), 'must not contain unpaired UTF-16 surrogates')
  t.equal(tokenIdProblem('ab\ud83d\ude00cd'), null, 'a pair is one character')
})

t.test('non-strings', async (t) => {
  t.notOk(isValidTokenId(123))
  t.notOk(isValidTokenId(null))
  t.notOk(isValidTokenId(undefined))
})
