import t from 'tap'
import type { RuntimeConnection } from '../../src/reactors/runtime/host/connection.js'
import { ECHO, startRuntime, type Runtime } from '../fixtures/reactors/harness.js'
import { startTestApp } from '../helpers/app.js'
import { appKey } from '../helpers/tokens.js'

// What a Reactor (or its caller) can make the runtime's boundaries do: native work that ignores
// termination, frames near the lane limits, messages of any size, code that escapes its wrapper.
// Each case must cost at most its own call: the runtime is never restarted, and another
// tenant's call in flight at the same time succeeds.

const SLOW_VICTIM = 'module.exports = async () => { const e = Date.now() + 1500; while (Date.now() < e); return { raw: "victim" } }'

/** Starts another tenant's 1.5 s call and waits until it is surely in flight. */
async function victimInFlight(rt: Runtime): Promise<Promise<unknown>> {
  const victim = rt.run(SLOW_VICTIM, {}, { tenantId: 'other', reactorId: 'victim' }).then(
    (v) => v,
    (e: unknown) => e,
  )
  await new Promise((resolve) => setTimeout(resolve, 300))
  return victim
}

t.test('Intl.Segmenter is gone: a warm call iterating it cannot hold its lane past the deadline', async (t) => {
  // Iterating the segments of a long text ran in ICU code V8 could not stop: a warm call
  // (synchronous on the worker thread) held the lane for 3-55 s, past the deadline + 1 s, and
  // the API process killed the runtime with every call in it.
  const rt = await startRuntime(t, { timeoutMs: 1000 })
  const spin = `module.exports = async (req) => {
    if (!req.args.go) return { raw: typeof Intl.Segmenter }
    let n = 0
    for (const s of new Intl.Segmenter('en', { granularity: 'word' }).segment('ab '.repeat(1 << 19))) n++
    return { raw: n }
  }`
  t.same(await rt.run(ECHO, 1, { tenantId: 'victim', reactorId: 'echo' }), { kind: 'ok', value: { raw: 1 } })
  t.same(await rt.run(spin, {}, { tenantId: 'attacker', reactorId: 'spin' }), { kind: 'ok', value: { raw: 'undefined' } }, 'not in the realm')
  const attack = rt.run(spin, { go: true }, { tenantId: 'attacker', reactorId: 'spin' }).then(
    (v) => v,
    (e: unknown) => e,
  )
  t.same(await rt.run(ECHO, 2, { tenantId: 'victim', reactorId: 'echo' }), { kind: 'ok', value: { raw: 2 } }, 'the lane serves another tenant')
  t.match(await attack, { code: 'reactor_error', detail: /TypeError/ })
  t.equal(rt.sup.stats().restarts, 0, 'the runtime was not killed')
  t.same(await rt.run(ECHO, 3, { tenantId: 'victim', reactorId: 'echo' }), { kind: 'ok', value: { raw: 3 } })
})

t.test('lane frames: a valid call always fits, and one that does not fails alone', async (t) => {
  t.test('a cold start of code that is large as JSON, with args near the payload limit', async (t) => {
    // 49,000 control characters are six bytes each JSON-escaped: in the invoke frame's header
    // they overran the worker's bound (payload + 64 KiB), and the worker died with every call.
    const rt = await startRuntime(t, { timeoutMs: 10_000 })
    const payload = 5 * 1024 * 1024
    const code = '/*' + '\u0001'.repeat(49_000) + '*/ module.exports = async (req) => ({ raw: req.args.length })'
    await rt.sup.compile(code)
    const victim = await victimInFlight(rt)
    const args = 'x'.repeat(payload - 100_000)
    t.same(await rt.run(code, args, { tenantId: 'attacker', reactorId: 'a' }), { kind: 'ok', value: { raw: args.length } })
    t.same(await victim, { kind: 'ok', value: { raw: 'victim' } }, 'another tenant\'s call is not affected')
    t.equal(rt.sup.stats().restarts, 0, 'the runtime was not restarted')
  })

  t.test('a compile check of the longest code in three-byte characters under a small payload limit', async (t) => {
    // 50,000 characters of three UTF-8 bytes are 150 KB: more than 64 KiB + 64 KiB.
    const rt = await startRuntime(t, { payloadMaxBytes: 64 * 1024 })
    const code = 'module.exports = async () => ({ raw: 1 }) //' + '€'.repeat(50_000 - 44)
    t.equal(code.length, 50_000)
    await rt.sup.compile(code)
    t.same(await rt.run(code), { kind: 'ok', value: { raw: 1 } })
    t.equal(rt.sup.stats().restarts, 0, 'the runtime was not restarted')
  })

  t.test('a frame larger than the worker takes fails its own call, not the runtime', async (t) => {
    // Not reachable through the supervisor's checks (they are what keeps frames in bounds); a
    // frame past the worker's bound still must not take down the worker and every call in it.
    const rt = await startRuntime(t, { payloadMaxBytes: 64 * 1024, codeMaxChars: 1000 })
    t.same(await rt.run(ECHO, 1, { reactorId: 'echo' }), { kind: 'ok', value: { raw: 1 } })
    const { connection } = (rt.sup as unknown as { runtime: { connection: RuntimeConnection } }).runtime
    const request = { reactorId: 'echo', version: '1', code: ECHO, context: {} }
    const huge = JSON.stringify({ args: 'x'.repeat(300_000), configuration: {} })
    t.match(await connection.run(request, huge, 3000), { start: 'warm', outcome: { kind: 'error', code: 'reactor_error', detail: /larger than the runtime takes/ } })
    t.match(await connection.run({ ...request, reactorId: 'other' }, huge, 3000), { start: 'cold', outcome: { kind: 'error', detail: /larger than the runtime takes/ } })
    t.same(await rt.run(ECHO, 2, { reactorId: 'echo' }), { kind: 'ok', value: { raw: 2 } }, 'the warm isolate still serves')
    t.match(rt.sup.stats(), { coldStarts: 1, warmStarts: 1 }, 'the echo isolate was kept')
    t.equal(rt.sup.stats().restarts, 0, 'the runtime was not restarted')
  })
  t.end()
})

t.test('details the worker sends are cut, so no answer outgrows the host\'s frame limit', async (t) => {
  const rt = await startRuntime(t, { timeoutMs: 10_000, payloadMaxBytes: 64 * 1024 })
  // V8 quotes a regular expression literal whole in its message: 40,000 control characters
  // were 240 KB of JSON in a frame header, past the API process's bound (64 KiB + 64 KiB).
  const code = `module.exports = async () => /(${'\u0001'.repeat(40_000)}/`
  const compiled = await rt.sup.compile(code).then(
    () => undefined,
    (e: unknown) => e,
  )
  t.match(compiled, { code: 'reactor_compile', status: 422, detail: /^SyntaxError: Invalid regular expression: .*\.\.\. \(line 1, column \d+\)$/ })
  t.ok((compiled as { detail: string }).detail.length <= 400, 'cut, with the position kept')
  const victim = await victimInFlight(rt)
  const run = await rt.fail(code, {}, { tenantId: 'attacker', reactorId: 'regex' })
  t.equal(run.code, 'reactor_error')
  t.ok((run.detail ?? '').length <= 503, `the detail is cut (${run.detail?.length})`)
  t.same(await victim, { kind: 'ok', value: { raw: 'victim' } }, 'another tenant\'s call is not affected')
  t.equal(rt.sup.stats().restarts, 0, 'the runtime was not restarted')
})

t.test('code that closes its CommonJS wrapper is refused, at the check and at a cold start', async (t) => {
  const rt = await startRuntime(t, { timeoutMs: 10_000, payloadMaxBytes: 64 * 1024 })
  // At the script's top level a `let` is a binding of the isolate's one context, shared by its
  // calls: one caller's data reached the next. And a top-level throw of 200,000 characters went
  // out whole, in a frame larger than the API process takes.
  const stash = `module.exports = async (req) => {
    const seen = stash.slice()
    if (req.args.secret) stash.push(req.args.secret)
    return { raw: seen }
  } }); let stash = []; (function () {`
  const bigThrow = "}); throw 'x'.repeat(200000); (function () {"
  for (const code of [stash, bigThrow, '}); (function () {']) {
    const refused = await rt.sup.compile(code).then(
      () => undefined,
      (e: unknown) => e,
    )
    t.match(refused, { code: 'reactor_compile', status: 422, detail: /^SyntaxError: The code closes the module function it runs in/ })
  }
  const victim = await victimInFlight(rt)
  // Code saved before the check: refused by the runtime as well, and never evaluated.
  const first = await rt.fail(stash, { secret: '4242424242424242' }, { tenantId: 'attacker', reactorId: 'stash' })
  const second = await rt.fail(stash, {}, { tenantId: 'attacker', reactorId: 'stash' })
  for (const err of [first, second]) t.match(err, { code: 'reactor_error', detail: /^The Reactor code does not compile: SyntaxError: The code closes the module function/ })
  t.notMatch(second.detail, /4242/)
  const thrown = await rt.fail(bigThrow, {}, { tenantId: 'attacker', reactorId: 'throw' })
  t.ok((thrown.detail ?? '').length <= 503, 'a short detail')
  t.same(await victim, { kind: 'ok', value: { raw: 'victim' } }, 'another tenant\'s call is not affected')
  t.equal(rt.sup.stats().restarts, 0, 'the runtime was not restarted')
})

t.test('code that only compiles wrapped, without escaping it, still works', async (t) => {
  const rt = await startRuntime(t)
  const topLevelReturn = 'module.exports = async (req) => ({ raw: req.args })\nif (module.exports) return\nmodule.exports = null'
  const newTarget = 'const called = new.target === undefined\nmodule.exports = async () => ({ raw: called })'
  await rt.sup.compile(topLevelReturn)
  await rt.sup.compile(newTarget)
  for (let i = 0; i < 2; i++) {
    t.same(await rt.run(topLevelReturn, i), { kind: 'ok', value: { raw: i } })
    t.same(await rt.run(newTarget), { kind: 'ok', value: { raw: true } })
  }
  t.same(rt.sup.stats(), { coldStarts: 2, warmStarts: 2, restarts: 0, syncOverruns: 0 })
})

t.test('HTTP: saving code that closes its wrapper is a 422; large code with large args answers', async (t) => {
  const app = await startTestApp(t)
  const caller = await appKey(app, { type: 'private', permissions: ['token:use'] })
  const escaped = await app.request('POST', '/reactors', { body: { name: 'escaped', code: "}); throw 'x'.repeat(6000000); (function () {" } })
  t.equal(escaped.status, 422)
  t.match(escaped.body.detail, /closes the module function/)
  const code = '/*' + '\u0001'.repeat(49_000) + '*/ module.exports = async (req) => ({ raw: req.args.length })'
  const saved = await app.request('POST', '/reactors', { body: { name: 'wide', code } })
  t.equal(saved.status, 201)
  const args = 'x'.repeat(5 * 1024 * 1024 - 150_000)
  const res = await app.request('POST', `/reactors/${saved.body.id}/react`, { key: caller, body: { args } })
  t.equal(res.status, 200)
  t.equal(res.body.raw, args.length)
  t.equal(app.services.supervisor.stats().restarts, 0, 'the runtime was not restarted')
})
