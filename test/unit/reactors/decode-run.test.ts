import t from 'tap'
import { decodeRun } from '../../../src/reactors/runtime/child/decode-run.js'

const LIMIT = 1000
const run = (meta: unknown, json = '') => decodeRun([JSON.stringify(meta), json], LIMIT)

t.test('ok keeps the value as JSON text for the API process to parse once', async (t) => {
  t.same(run({ kind: 'ok' }, '{"raw":1}'), { kind: 'ok', json: '{"raw":1}' })
  t.same(run({ kind: 'ok' }), { kind: 'ok', json: '' })
})

t.test('Reactor error codes pass; a forged time-out or unknown code becomes reactor_error', async (t) => {
  t.same(run({ kind: 'error', code: 'bad_request', message: 'no' }), { kind: 'error', code: 'bad_request', detail: 'no' })
  t.same(run({ kind: 'error', code: 'unauthenticated', message: 'who' }), { kind: 'error', code: 'unauthenticated', detail: 'who' })
  t.same(run({ kind: 'error', code: 'forbidden', message: 'nope' }), { kind: 'error', code: 'forbidden', detail: 'nope' })
  t.same(run({ kind: 'error', code: 'reactor_timeout', message: 'fake' }), { kind: 'error', code: 'reactor_error', detail: 'fake' })
  t.same(run({ kind: 'error', code: 'internal', message: 'x' }), { kind: 'error', code: 'reactor_error', detail: 'x' })
  t.match(run({ kind: 'error', code: 'bad_request', message: '' }), { detail: 'The Reactor failed without a message.' })
})

t.test('custom responses: status and headers are checked on the host side', async (t) => {
  t.same(run({ kind: 'response', status: 418, headers: { 'X-A': 'b', n: 1 } }, '{"x":1}'), {
    kind: 'response',
    status: 418,
    headers: { 'x-a': 'b', n: '1' },
    json: '{"x":1}',
  })
  for (const status of [99, 199, 600, 200.5, '200', undefined]) {
    t.match(run({ kind: 'response', status, headers: {} }), { kind: 'error', code: 'reactor_error', detail: /status/ }, `status ${String(status)}`)
  }
  t.match(run({ kind: 'response', status: 200, headers: { a: 'x\r\nSet-Cookie: y' } }), { code: 'reactor_error', detail: /invalid header/ })
  t.match(run({ kind: 'response', status: 200, headers: { 'bad name': 'x' } }), { code: 'reactor_error', detail: /invalid header/ })
  t.match(run({ kind: 'response', status: 200, headers: { a: { nested: 1 } } }), { code: 'reactor_error', detail: /must be a string/ })
  t.match(run({ kind: 'response', status: 200, headers: ['x'] }), { code: 'reactor_error', detail: /object of strings/ })
})

t.test('size is measured in UTF-8 bytes, whatever the sandbox claimed', async (t) => {
  const detail = `The Reactor result is larger than the ${LIMIT}-byte limit.`
  t.same(run({ kind: 'too_large' }), { kind: 'error', code: 'reactor_error', detail })
  t.same(run({ kind: 'ok' }, JSON.stringify('é'.repeat(600))), { kind: 'error', code: 'reactor_error', detail })
  t.equal(run({ kind: 'ok' }, JSON.stringify('e'.repeat(600))).kind, 'ok')
})

t.test('anything malformed is a reactor_error, never a crash', async (t) => {
  for (const result of [undefined, 'x', ['{'], ['not json', ''], ['[]', ''], ['{"kind":"what"}', ''], [1, 2]]) {
    t.match(decodeRun(result, LIMIT), { kind: 'error', code: 'reactor_error', detail: /malformed/ }, JSON.stringify(result) ?? 'undefined')
  }
})

t.test('a Reactor error message reaches the caller cut to 500 characters, header names are never echoed', async (t) => {
  const long = decodeRun([JSON.stringify({ kind: 'error', code: 'reactor_error', message: 'y'.repeat(5000) }), ''], 1 << 20)
  t.equal(long.kind === 'error' ? long.detail : '', `${'y'.repeat(500)}...`)
  const header = decodeRun([JSON.stringify({ kind: 'response', status: 200, headers: { 'x-4539578763621445': {} } }), ''], 1 << 20)
  t.notMatch(JSON.stringify(header), '4539578763621445')
})
