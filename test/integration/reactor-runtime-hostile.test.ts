import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { getPriority } from 'node:os'
import t from 'tap'
import { ISOLATE_THREAD_NICE } from '../../src/reactors/runtime/child/thread-priority.js'
import { ECHO, fixture, startRuntime } from '../fixtures/reactors/harness.js'

// Every hostile fixture must fail with its exact code and status, and leave the runtime able
// to serve the very next invocation.

const timeouts = ['infinite-loop.js', 'await-loop.js', 'never-settles.js']
for (const name of timeouts) {
  t.test(`${name}: 504 reactor_timeout, then the next call succeeds`, async (t) => {
    const rt = await startRuntime(t, { timeoutMs: 500 })
    const err = await rt.fail(fixture(name))
    t.equal(err.code, 'reactor_timeout')
    t.equal(err.status, 504)
    t.match(err.detail, /500 ms/)
    t.same(await rt.run(ECHO, { after: name }), { kind: 'ok', value: { raw: { after: name } } })
    t.equal(rt.sup.stats().restarts, 0, 'the deadline disposes the isolate; the process stays')
  })
}

t.test('a hostile call on a warm isolate does not poison the next call of the same Reactor', async (t) => {
  const rt = await startRuntime(t, { timeoutMs: 500 })
  const code = 'module.exports = async (req) => { if (req.args.hang) for (;;) await null; return { raw: "fine" } }'
  t.same(await rt.run(code, {}), { kind: 'ok', value: { raw: 'fine' } })
  t.equal((await rt.fail(code, { hang: true })).code, 'reactor_timeout')
  t.same(await rt.run(code, {}), { kind: 'ok', value: { raw: 'fine' } })
})

t.test('memory bomb: 500 reactor_error naming the memory limit; the next call succeeds', async (t) => {
  // Filling 128 MB took 8 s of a 10 s deadline on a slow 2-core host, and past it under load.
  const rt = await startRuntime(t, { timeoutMs: 30_000 })
  const err = await rt.fail(fixture('memory-bomb.js'))
  t.equal(err.code, 'reactor_error')
  t.equal(err.status, 500)
  t.match(err.detail, /memory/)
  t.same(await rt.run(ECHO, { after: 'bomb' }), { kind: 'ok', value: { raw: { after: 'bomb' } } })
})

t.test('deep recursion: 500 reactor_error with the RangeError message', async (t) => {
  const rt = await startRuntime(t)
  const err = await rt.fail(fixture('deep-recursion.js'))
  t.equal(err.code, 'reactor_error')
  t.equal(err.status, 500)
  t.match(err.detail, /Maximum call stack size exceeded/)
  t.same(await rt.run(ECHO, 1), { kind: 'ok', value: { raw: 1 } })
})

t.test('a result over the payload limit: 500 reactor_error with a clear detail', async (t) => {
  const rt = await startRuntime(t, { payloadMaxBytes: 64 * 1024 })
  const ascii = await rt.fail(fixture('huge-result.js'), { size: 100_000 })
  t.equal(ascii.code, 'reactor_error')
  t.equal(ascii.status, 500)
  t.equal(ascii.detail, 'The Reactor result is larger than the 65536-byte limit.')
  // 40,000 characters pass the in-isolate length check but are 80,000 bytes of UTF-8.
  const multibyte = await rt.fail(fixture('huge-result.js'), { size: 40_000, char: 'é' })
  t.equal(multibyte.detail, 'The Reactor result is larger than the 65536-byte limit.')
  t.same(await rt.run(fixture('huge-result.js'), { size: 10 }), { kind: 'ok', value: { raw: 'xxxxxxxxxx' } })
})

t.test('the default 5 MB limit: a 5 MB + 1 byte result fails, the same call under it passes', async (t) => {
  const rt = await startRuntime(t, { timeoutMs: 10_000 })
  const limit = 5 * 1024 * 1024
  const envelope = JSON.stringify({ kind: 'ok' }).length + JSON.stringify({ raw: '' }).length
  const err = await rt.fail(fixture('huge-result.js'), { size: limit - envelope + 1 })
  t.equal(err.detail, `The Reactor result is larger than the ${limit}-byte limit.`)
  const ok = await rt.run(fixture('huge-result.js'), { size: limit - envelope })
  t.equal(((ok as { value: { raw: string } }).value.raw).length, limit - envelope)
})

t.test('invocation payload over the limit: 413 before any isolate is touched', async (t) => {
  const rt = await startRuntime(t, { payloadMaxBytes: 1024 })
  const err = await rt.fail(ECHO, 'x'.repeat(1024))
  t.equal(err.code, 'payload_too_large')
  t.equal(err.status, 413)
  t.same(rt.sup.stats(), { coldStarts: 0, warmStarts: 0, restarts: 0, syncOverruns: 0 })
})

t.test('escape probes see no host object', async (t) => {
  const rt = await startRuntime(t)
  const out = await rt.run(fixture('escape-probes.js'))
  if (out.kind !== 'ok') throw new Error('expected a value')
  const report = out.value as Record<string, unknown>
  const { globals, stack, ...probes } = report
  for (const [name, result] of Object.entries(probes)) {
    t.notMatch(String(result), /^FOUND/, `${name}: ${String(result)}`)
  }
  t.equal(probes.constructorChain, 'threw ReferenceError', 'Function("return process") finds no process')
  const names = globals as string[]
  for (const forbidden of ['process', 'require', 'Buffer', 'global', 'setTimeout', '__tessera_bridge', 'ivm', '_ivm', 'WebAssembly', 'SharedArrayBuffer', 'Atomics']) {
    t.notOk(names.includes(forbidden), `no global ${forbidden}`)
  }
  for (const expected of ['fetch', 'BadRequestError', 'AuthenticationError', 'AuthorizationError', 'CustomHttpResponseError']) {
    t.ok(names.includes(expected), `global ${expected}`)
  }
  t.notMatch(String(stack), /\/work\/|file:|node_modules|\.ts/, 'stacks carry no host paths')
})

t.test('no resizable ArrayBuffer: it grew outside the isolate\'s memory limit', async (t) => {
  const rt = await startRuntime(t)
  const code = 'module.exports = async () => { const b = new ArrayBuffer(8, { maxByteLength: 2 ** 30 }); return { raw: [typeof b.resize, b.resizable === true, typeof ArrayBuffer.prototype.resize] } }'
  t.same(await rt.run(code), { kind: 'ok', value: { raw: ['undefined', false, 'undefined'] } })
})

t.test('throwing a non-Error: 500 reactor_error carrying the thrown value', async (t) => {
  const rt = await startRuntime(t)
  const code = fixture('throw-non-error.js')
  t.match(await rt.fail(code, { value: 42 }), { code: 'reactor_error', status: 500, detail: '42' })
  t.match(await rt.fail(code, { value: 'plain string' }), { code: 'reactor_error', detail: 'plain string' })
  t.match(await rt.fail(code, { value: null }), { code: 'reactor_error', detail: 'null' })
  t.match(await rt.fail(code, { kind: 'getter' }), { code: 'reactor_error', detail: 'The Reactor threw a value that cannot be described' })
  t.same(await rt.run(ECHO, 2), { kind: 'ok', value: { raw: 2 } })
})

t.test('a crash of the runtime process fails the calls in flight with 500; the next call succeeds', async (t) => {
  let release: () => void = () => undefined
  const entered = new Promise<void>((resolve) => {
    release = resolve
  })
  const rt = await startRuntime(t, { timeoutMs: 10_000 }, { tokenize: () => (release(), new Promise(() => {})) })
  const inFlight = rt.fail(fixture('barrier.js'), { n: 1 })
  await entered
  process.kill(rt.sup.pid ?? 0, 'SIGKILL')
  const err = await inFlight
  t.equal(err.code, 'reactor_error')
  t.equal(err.status, 500)
  t.same(await rt.run(ECHO, 'again'), { kind: 'ok', value: { raw: 'again' } })
  t.equal(rt.sup.stats().restarts, 1)
})

t.test('a stuck runtime process is killed at the hard deadline: 504, then restarted', async (t) => {
  const rt = await startRuntime(t, { timeoutMs: 300 })
  const pid = rt.sup.pid ?? 0
  process.kill(pid, 'SIGSTOP')
  const err = await rt.fail(ECHO, 'stuck')
  t.equal(err.code, 'reactor_timeout')
  t.equal(err.status, 504)
  t.same(await rt.run(ECHO, 'unstuck'), { kind: 'ok', value: { raw: 'unstuck' } })
  t.not(rt.sup.pid, pid)
})

t.test('Reactor code runs on lower-priority threads; the runtime main thread and the API process do not', { skip: existsSync('/proc/thread-self') ? false : 'needs Linux per-thread nice values' }, async (t) => {
  const rt = await startRuntime(t)
  t.same(await rt.run(ECHO, 'niced'), { kind: 'ok', value: { raw: 'niced' } })
  const pid = rt.sup.pid ?? 0
  const niceOf = (tid: string) => Number(readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8').split(') ')[1]!.split(' ')[16])
  const own = getPriority(process.pid)
  const threads = readdirSync(`/proc/${pid}/task`).map((tid) => ({ tid, nice: niceOf(tid) }))
  t.equal(niceOf(String(pid)), own, 'the main thread keeps the API process priority')
  // The worker threads and the isolated-vm threads they started (at least the one that ran the call).
  t.ok(threads.filter((th) => th.nice === Math.max(own, ISOLATE_THREAD_NICE)).length >= 2, JSON.stringify(threads))
  t.equal(getPriority(process.pid), own, 'the API process is untouched')
})
