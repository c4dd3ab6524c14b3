import t from 'tap'
import { AppError } from '../../../src/errors/index.js'
import { toOutcome } from '../../../src/reactors/runtime/host/outcome.js'

t.test('values are parsed once; undefined travels as empty text', async (t) => {
  t.same(toOutcome({ kind: 'ok', json: '{"raw":[1]}' }), { kind: 'ok', value: { raw: [1] } })
  t.same(toOutcome({ kind: 'ok', json: '' }), { kind: 'ok', value: undefined })
  t.same(toOutcome({ kind: 'response', status: 418, headers: { a: 'b' }, json: '"tea"' }), { kind: 'response', status: 418, headers: { a: 'b' }, body: 'tea' })
})

t.test('errors become AppErrors with the registry status', async (t) => {
  const cases = [
    ['bad_request', 400],
    ['unauthenticated', 401],
    ['forbidden', 403],
    ['reactor_error', 500],
    ['reactor_timeout', 504],
  ] as const
  for (const [code, status] of cases) {
    t.throws(() => toOutcome({ kind: 'error', code, detail: 'why' }), { code, status, detail: 'why' })
  }
  const err = (() => {
    try {
      return toOutcome({ kind: 'ok', json: '{' })
    } catch (e) {
      return e
    }
  })()
  t.ok(err instanceof AppError)
  t.match(err, { code: 'reactor_error', detail: /malformed/ })
})
