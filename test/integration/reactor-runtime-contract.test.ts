import { createRequire } from 'node:module'
import t from 'tap'
import { AppError } from '../../src/errors/index.js'
import type { BridgeFetchRequest } from '../../src/reactors/supervisor.js'
import { ECHO, example, fixture, startRuntime } from '../fixtures/reactors/harness.js'

t.test('the sandbox contract: args and configuration in, any return value out', async (t) => {
  const rt = await startRuntime(t)
  const code = 'module.exports = async function (req) { const { args, configuration } = req; return { raw: { args, configuration } } }'
  t.same(await rt.run(code, { a: [1, 'two'] }, { configuration: { KEY: 'value' } }), {
    kind: 'ok',
    value: { raw: { args: { a: [1, 'two'] }, configuration: { KEY: 'value' } } },
  })
  t.same(await rt.run('module.exports = () => 7'), { kind: 'ok', value: 7 }, 'a sync function and a bare number')
  t.same(await rt.run('module.exports = async () => undefined'), { kind: 'ok', value: undefined })
  t.same(await rt.run('exports.x = 1; module.exports = async () => ["list"]'), { kind: 'ok', value: ['list'] })
  t.match(await rt.fail('module.exports = 42'), { code: 'reactor_error', detail: 'module.exports must be a function' })
  t.match(await rt.fail('module.exports = async () => 10n'), { code: 'reactor_error', detail: /not serializable as JSON/ })
})

t.test('error classes map to statuses; other throws carry their message', async (t) => {
  const rt = await startRuntime(t)
  const code = fixture('throw-classes.js')
  t.match(await rt.fail(code, { throw: 'bad_request' }), { code: 'bad_request', status: 400, detail: 'the amount is missing' })
  t.match(await rt.fail(code, { throw: 'authentication' }), { code: 'unauthenticated', status: 401, detail: 'the partner key is wrong' })
  t.match(await rt.fail(code, { throw: 'authorization' }), { code: 'forbidden', status: 403, detail: 'not for this merchant' })
  t.match(await rt.fail(code, { throw: 'error' }), { code: 'reactor_error', status: 500, detail: 'the partner API is down' })
  t.match(await rt.fail(code, { throw: 'subclass' }), { code: 'bad_request', detail: 'subclass still counts' })
  t.same(await rt.run(code, { throw: 'custom' }), { kind: 'response', status: 418, headers: { 'x-teapot': 'yes' }, body: { short: 'and stout' } })
  t.match(await rt.fail(code, { throw: 'custom_bad_status' }), { code: 'reactor_error', detail: /status between 200 and 599/ })
  const lookalike = 'class BadRequestError extends Error {}; module.exports = async () => { throw new BadRequestError("fake") }'
  t.match(await rt.fail(lookalike), { code: 'reactor_error', detail: 'fake' }, 'a class of the same name does not forge a status')
  const replaced = '"use strict"; module.exports = async () => { globalThis.BadRequestError = class extends Error {} }'
  t.match(await rt.fail(replaced), { code: 'reactor_error', detail: /threw a TypeError/ }, 'the global class cannot be replaced')
})

t.test('calls share a warm context but nothing written: frozen globals, built-ins and module wrapper, a fresh module each call', async (t) => {
  const rt = await startRuntime(t)
  const code = fixture('global-state.js')
  for (let i = 0; i < 3; i++) t.same(await rt.run(code), { kind: 'ok', value: { seen: null, polluted: false, calls: 1, stashed: [null, null], wrapperFrozen: true } })
  t.match(rt.sup.stats(), { coldStarts: 1, warmStarts: 2, restarts: 0 }, 'the same warm isolate served the later calls')
})

t.test('the realm is hardened: everything reachable is frozen, overrides of inherited built-ins still work, no RegExp statics', async (t) => {
  const rt = await startRuntime(t)
  const code = fixture('realm-probes.js')
  const first = await rt.run(code, { match: 'card 4242424242424242' })
  t.match(first, {
    kind: 'ok',
    value: {
      unfrozen: [],
      writeBuiltin: 'TypeError',
      newGlobal: 'TypeError',
      replaceFetch: 'TypeError',
      overrides: ['PaymentError', 'custom', 'mine', '[object Array]'],
      regexpStatics: ['undefined', 'undefined', 'undefined'],
    },
  })
  t.ok((first as { value: { checked: number } }).value.checked > 500, 'the walk reached the built-ins')
  t.match(await rt.run(code), { kind: 'ok', value: { regexpStatics: ['undefined', 'undefined', 'undefined'] } }, 'a later call finds no last match')
})

t.test('bridges: tokenize, detokenize and fetch round-trip copies through the parent', async (t) => {
  const seen: Array<{ op: string; ctx: unknown; arg: unknown }> = []
  const rt = await startRuntime(t, {}, {
    tokenize: async (ctx, value) => (seen.push({ op: 'tokenize', ctx, arg: value }), { id: 'tok_1', type: 'token' }),
    detokenize: async (ctx, value) => {
      seen.push({ op: 'detokenize', ctx, arg: value })
      throw new AppError('forbidden', { detail: 'The key may not read token tok_9.' })
    },
    fetch: async (ctx, req: BridgeFetchRequest) => {
      seen.push({ op: 'fetch', ctx, arg: req })
      return { status: 201, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ created: true }) }
    },
  })
  const out = await rt.run(fixture('bridges.js'), { tokenize: { number: '4242' }, detokenize: '{{ tok_9 }}', url: 'https://api.example/charges' }, { context: { app: 'A1' } })
  t.same(out, {
    kind: 'ok',
    value: {
      raw: {
        token: { value: { id: 'tok_1', type: 'token' } },
        revealed: { error: 'The key may not read token tok_9.', isError: true },
        status: 201,
        ok: true,
        headers: { 'content-type': 'application/json' },
        json: { created: true },
        text: '{"created":true}',
      },
    },
  })
  t.same(seen, [
    { op: 'tokenize', ctx: { app: 'A1' }, arg: { number: '4242' } },
    { op: 'detokenize', ctx: { app: 'A1' }, arg: '{{ tok_9 }}' },
    { op: 'fetch', ctx: { app: 'A1' }, arg: { url: 'https://api.example/charges', method: 'POST', headers: { 'x-trace': 'abc' }, body: '{"hello":"world"}' } },
  ])
})

t.test('a host failure that is not an AppError reaches the Reactor as a generic message', async (t) => {
  const rt = await startRuntime(t, {}, { tokenize: async () => Promise.reject(new Error('connection string postgres://secret')) })
  const code = 'module.exports = async (req) => { try { await req.svc.tokenize(1) } catch (e) { return e.message } }'
  t.same(await rt.run(code), { kind: 'ok', value: 'The service call failed.' })
  t.ok(rt.logs.some((l) => l.msg === 'reactor bridge call failed'), 'and the host logs it')
})

t.test('bridge calls are capped per invocation', async (t) => {
  const rt = await startRuntime(t, { timeoutMs: 10_000 }, { tokenize: async (_ctx, value) => value })
  const code = `module.exports = async (req) => {
    const calls = []
    for (let i = 0; i < 1001; i++) calls.push(req.svc.tokenize(i).catch((e) => e.message))
    const results = await Promise.all(calls)
    return { first: results[0], last: results[1000] }
  }`
  t.same(await rt.run(code), { kind: 'ok', value: { first: 0, last: 'A Reactor may make at most 1000 service calls per invocation.' } })
})

t.test('compile: syntax errors are 422 with the position in the user\'s lines', async (t) => {
  const rt = await startRuntime(t)
  await rt.sup.compile(example('echo.js'))
  const err = await rt.sup.compile('module.exports = async () => {\n  let x = ;\n}').then(
    () => undefined,
    (e: unknown) => e,
  )
  t.ok(err instanceof AppError)
  t.match(err, { code: 'reactor_compile', status: 422, detail: "SyntaxError: Unexpected token ';' (line 2, column 11)" })
  const long = await rt.sup.compile('x'.repeat(50_001)).then(
    () => undefined,
    (e: unknown) => e,
  )
  t.match(long, { code: 'validation', status: 400, errors: { code: ['must be at most 50000 characters'] } })
})

t.test('example Reactors', async (t) => {
  const requests: BridgeFetchRequest[] = []
  const rt = await startRuntime(t, {}, {
    fetch: async (_ctx, req) => {
      requests.push(req)
      const body = req.url.endsWith('/cards') ? { number: '4111111111111111', exp_month: 12, exp_year: 2030, cvc: '123' } : { id: 'ch_1', status: 'succeeded' }
      return { status: 200, headers: {}, body: JSON.stringify(body) }
    },
  })
  t.same(await rt.run(example('echo.js'), { hello: 'world' }), { kind: 'ok', value: { raw: { hello: 'world' } } })
  const card = { number: '5555555555554444', expiration_month: 4, expiration_year: 2031, cvc: '321' }
  t.same(await rt.run(example('card-brand.js'), { card }), { kind: 'ok', value: { raw: { brand: 'mastercard', last4: '4444' } } })
  t.match(await rt.fail(example('card-brand.js'), { card: 'nope' }), { code: 'bad_request' })
  const config = { PAYMENT_API_URL: 'https://pay.example/charges', PAYMENT_API_KEY: 'k', ISSUER_API_URL: 'https://issuer.example' }
  t.same(await rt.run(example('charge-card.js'), { card, amount: 1299 }, { configuration: config }), { kind: 'ok', value: { raw: { id: 'ch_1', status: 'succeeded' } } })
  t.match(JSON.parse(requests[0]?.body ?? '{}'), { amount: 1299, card: { number: card.number } }, 'the revealed card went to the API')
  t.same(await rt.run(example('tokenize-response.js'), { holder: 'Ada' }, { configuration: config }), {
    kind: 'ok',
    value: {
      raw: { issued: true, holder: 'Ada' },
      tokenize: { card: { type: 'card', data: { number: '4111111111111111', expiration_month: 12, expiration_year: 2030, cvc: '123' } } },
    },
  })
})

t.test('the API process never loads isolated-vm', async (t) => {
  const rt = await startRuntime(t)
  await rt.run(ECHO)
  const loaded = Object.keys(createRequire(import.meta.url).cache)
  t.notOk(loaded.some((path) => path.includes('isolated-vm')))
})

t.test('close is idempotent and later calls are refused', async (t) => {
  const rt = await startRuntime(t)
  await Promise.all([rt.sup.close(), rt.sup.close()])
  await rt.sup.close()
  t.match(await rt.fail(ECHO), { code: 'unavailable' })
  t.equal(rt.sup.pid, undefined)
})
