import t from 'tap'
import { mayHaveWritten } from '../../../src/store/bounded-client.js'
import { classifyFailure, unavailableError, confirmedWrite, isUncertainWrite } from '../../../src/store/unavailable.js'

t.test('failures of availability are told apart from other database errors', async (t) => {
  t.equal(classifyFailure(Object.assign(new Error('canceling statement due to statement timeout'), { code: '57014' })), 'server')
  t.equal(classifyFailure(Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' })), 'server')
  t.equal(classifyFailure(Object.assign(new Error('connection failure'), { code: '08006' })), 'server')
  t.equal(classifyFailure(Object.assign(new Error('bind message has 70000 parameter formats'), { code: '08P01' })), undefined, 'a protocol violation is a bug: no retry passes')
  // A full disk, memory or I/O failure refused the statement: 503, not 500.
  for (const code of ['53100', '53200', '53300', '53000', '58030']) t.equal(classifyFailure(Object.assign(new Error('could not extend file'), { code })), 'server', code)
  t.equal(classifyFailure(Object.assign(new Error('value too long'), { code: '22001' })), undefined, 'a data error is not one of availability')
  t.equal(classifyFailure(new Error('Query read timeout')), 'client')
  t.equal(classifyFailure(new Error('Connection terminated unexpectedly')), 'client')
  t.equal(classifyFailure(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' })), 'client')
  t.equal(classifyFailure(Object.assign(new Error('x'), { name: 'KnexTimeoutError' })), 'client')
  t.equal(classifyFailure(Object.assign(new Error('duplicate key'), { code: '23505' })), undefined, 'a unique violation is the caller’s to translate')
  t.equal(classifyFailure(new Error('bug')), undefined)
  t.equal(classifyFailure('text'), undefined)
})

t.test('503 unavailable with Retry-After, the driver error kept as cause, no SQL in the detail', async (t) => {
  const cause = new Error('insert into "tokens" ... - Query read timeout')
  const err = unavailableError(cause, false)
  t.equal(err.status, 503)
  t.equal(err.code, 'unavailable')
  t.ok(Number(err.headers?.['Retry-After']) > 0)
  t.equal(err.cause, cause)
  t.notMatch(err.detail ?? '', /insert|tokens/)
  t.match(unavailableError(cause, true).detail, /may or may not have been applied/)
})

t.test('only a statement that could have committed on its own is reported as "may have been applied"', async (t) => {
  const outside = {}
  const inside = { __knexTxId: 'trx1' }
  t.equal(mayHaveWritten(outside, { sql: 'select * from tokens' }), false, 'a read outside a transaction')
  t.equal(mayHaveWritten(outside, { sql: 'insert into tokens ...' }), true, 'an autocommit write')
  t.equal(mayHaveWritten(outside, { sql: 'update tokens set ...' }), true)
  t.equal(mayHaveWritten(inside, { sql: 'insert into tokens ...' }), false, 'inside a transaction nothing commits before COMMIT')
  t.equal(mayHaveWritten(inside, 'COMMIT;'), true, 'the COMMIT itself')
})

t.test('confirmedWrite: a write whose answer was lost counts as done only when it is found', async (t) => {
  const lost = () => Promise.reject(unavailableError(Object.assign(new Error('Query read timeout')), true))
  const refused = unavailableError(new Error('x'), false)
  t.equal(isUncertainWrite(await lost().catch((e: unknown) => e)), true)
  t.equal(isUncertainWrite(refused), false)

  t.equal(await confirmedWrite(() => Promise.resolve(7), () => Promise.reject(new Error('not asked')), 100), 7, 'an answered write is not checked')
  await t.resolves(confirmedWrite(lost, () => Promise.resolve(true), 100), 'found: done')
  await t.rejects(confirmedWrite(lost, () => Promise.resolve(false), 100), { code: 'unavailable', detail: /may or may not/ }, 'not found: still unknown')
  await t.rejects(confirmedWrite(lost, () => Promise.reject(new Error('down')), 100), { code: 'unavailable' }, 'the check failed: still unknown')
  const start = Date.now()
  await t.rejects(confirmedWrite(lost, () => new Promise<boolean>(() => {}), 100), { code: 'unavailable' }, 'the check hangs: unknown, within its bound')
  t.ok(Date.now() - start < 1000)
  let asked = false
  const check = () => ((asked = true), Promise.resolve(true))
  await t.rejects(confirmedWrite(() => Promise.reject(refused), check, 100), { code: 'unavailable' }, 'nothing was sent: no check')
  await t.rejects(confirmedWrite(() => Promise.reject(new Error('constraint')), check, 100), /constraint/, 'other errors pass through')
  t.notOk(asked)
})
