import t from 'tap'
import { AppError, describeError } from '../../../src/errors/index.js'

const SECRET = '4539578763621445'

t.test('foreign errors keep class, code and frames, never their message or fields', async (t) => {
  const driver = Object.assign(new Error(`duplicate key value: Key (id)=(${SECRET})`), { code: '23505', detail: `Key (id)=(${SECRET}) already exists`, where: SECRET })
  const parse = (() => {
    try {
      JSON.parse(`x${SECRET}`)
    } catch (err) {
      return err
    }
  })()
  for (const err of [driver, parse, new TypeError(`Cannot create property 'x' on string '${SECRET}'`)]) {
    const logged = describeError(err)
    t.notMatch(JSON.stringify(logged), SECRET)
    t.ok(logged.stack && logged.stack.length > 0 && logged.stack.every((frame) => frame.startsWith('at ')), 'stack frames only')
  }
  t.match(describeError(driver), { type: 'Error', code: '23505' })
  t.match(describeError(parse), { type: 'SyntaxError' })
  t.same(describeError('a thrown string with ' + SECRET), { type: 'string' })
  t.same(describeError(null), { type: 'null' })
})

t.test('AppErrors keep code, status and their own detail; tenant text is dropped; causes are described the same way', async (t) => {
  const inner = new Error(`Unexpected token 'x', "x${SECRET}" is not valid JSON`)
  const reactor = new AppError('reactor_error', { detail: `The Reactor failed: ${SECRET}`, untrustedDetail: true, cause: inner })
  const wrapped = new AppError('destination_unreachable', { detail: 'The destination could not be reached (ECONNRESET).', cause: reactor })
  const logged = describeError(wrapped)
  t.notMatch(JSON.stringify(logged), SECRET)
  t.match(logged, { type: 'AppError', code: 'destination_unreachable', status: 502, detail: 'The destination could not be reached (ECONNRESET).', cause: { type: 'AppError', code: 'reactor_error', status: 500, cause: { type: 'Error' } } })
  t.equal(logged.cause?.detail, undefined, 'the Reactor-authored detail is not logged')
})

t.test('cause chains are bounded, even cyclic ones', async (t) => {
  const a = new Error('a')
  const b = new Error('b', { cause: a })
  ;(a as { cause?: unknown }).cause = b
  let depth = 0
  for (let e = describeError(a); e.cause !== undefined; e = e.cause) depth++
  t.ok(depth <= 4)
})
