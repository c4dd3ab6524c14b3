import t from 'tap'
import { startTestApp, type TestApp } from '../helpers/app.js'
import { rawRequest } from '../helpers/proxy.js'
import { closedPort, startStub } from '../helpers/stub-server.js'
import { appKey } from '../helpers/tokens.js'

/** A Luhn-valid card number that appears nowhere else (not a well-known test number). */
function cardNumber(): string {
  const body = `45395787636214${String(Math.floor(Math.random() * 10))}`
  let sum = 0
  for (let i = 0; i < body.length; i++) {
    let d = Number(body[body.length - 1 - i])
    if (i % 2 === 0) d = d * 2 > 9 ? d * 2 - 9 : d * 2
    sum += d
  }
  return body + String((10 - (sum % 10)) % 10)
}

const CARD = cardNumber()
// V8 quotes at most about ten characters around a JSON.parse error, so any 8 digits of the number count.
const FRAGMENTS = Array.from({ length: CARD.length - 7 }, (_, i) => CARD.slice(i, i + 8))
const leaks = (text: string) => FRAGMENTS.some((f) => text.includes(f))

interface Checked {
  label: string
  status: number
  text: string
}

t.test('a revealed card number reaches no log line and no error body, on every path that touches it', async (t) => {
  const logLines: string[] = []
  const app = await startTestApp(t, { SVC_LOG_LEVEL: 'trace', SVC_REACTOR_TIMEOUT_MS: '5000', SVC_PROXY_TIMEOUT_MS: '1000' }, { logLines })
  const echo = await startStub(t)
  const stalling = await startStub(t, () => {})
  const closed = `http://127.0.0.1:${await closedPort()}`
  const revealRules = [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read', 'token:use'] }]
  const caller = await appKey(app, { name: 'caller', type: 'private', rules: revealRules })
  const actor = await app.request('POST', '/applications', { body: { name: 'actor', type: 'private', rules: revealRules } })
  const token = await app.request('POST', '/tokens', { key: caller, body: { type: 'card', data: { number: CARD, expiration_month: 12, expiration_year: 2031, cvc: '987' } } })
  t.equal(token.status, 201)
  const id = token.body.id as string
  const number = `{{ ${id} | json: '$.number' }}`
  const checked: Checked[] = []
  /** Error answers must not carry the number; successes may (that is the point of revealing). */
  const check = (label: string, res: { status: number; text: string }, expect: number) => {
    t.equal(res.status, expect, `${label}: ${expect}`)
    checked.push({ label, status: res.status, text: res.text })
  }

  t.test('detokenize', async () => {
    check('detokenize', await app.request('POST', '/detokenize', { key: caller, body: { n: number } }), 200)
    check('detokenize, bad filter', await app.request('POST', '/detokenize', { key: caller, body: { n: `{{ ${id} | json: '$.number' | slice: 'a', 2 }}` } }), 400)
    check('detokenize, filter on the wrong type', await app.request('POST', '/detokenize', { key: caller, body: { n: `{{ ${id} | slice: 0, 2 }}` } }), 400)
  })

  t.test('Reactor args, results and errors', async () => {
    const reactor = async (code: string) => {
      const res = await app.request('POST', '/reactors', { body: { name: 'r', code, application: { id: actor.body.id } } })
      if (res.status !== 201) throw new Error(`${res.status} ${res.text}`)
      return (args: unknown) => app.request('POST', `/reactors/${res.body.id}/react`, { key: caller, body: { args } })
    }
    const card = { card: `{{ ${id} }}` }
    check('result', await (await reactor('module.exports = async (req) => ({ raw: req.args.card })'))(card), 200)
    check('JSON.parse on the number', await (await reactor("module.exports = async (req) => JSON.parse('x' + req.args.card.number)"))(card), 500)
    check('TypeError quoting the number', await (await reactor("'use strict'; module.exports = async (req) => { req.args.card.number.last4 = 1 }"))(card), 500)
    check('unserializable result', await (await reactor('module.exports = async (req) => ({ raw: req.args.card, n: 10n })'))(card), 500)
    check('bad custom header', await (await reactor("module.exports = async (req) => { throw new CustomHttpResponseError({ status: 200, headers: { ['x-' + req.args.card.number]: 1, y: 'a\\r\\n' + req.args.card.number } }) }"))(card), 500)
    // On purpose: the author's own message reaches the caller (capped), never the logs.
    const deliberate = await (await reactor("module.exports = async (req) => { throw new Error('declined: ' + req.args.card.number) }"))(card)
    t.equal(deliberate.status, 500)
    t.match(deliberate.body.detail, /declined/)
    const passedOn = await (await reactor("module.exports = async (req) => { try { JSON.parse('x' + req.args.card.number) } catch (e) { throw new BadRequestError(e.message) } }"))(card)
    t.equal(passedOn.status, 400, 'an engine message the author passes on is the author\'s text')
    const long = await (await reactor("module.exports = async () => { throw new Error('y'.repeat(5000)) }"))(card)
    t.ok(long.body.detail.length <= 503, `capped at 500 characters (${long.body.detail.length})`)
  })

  t.test('bridge calls', async () => {
    const reactor = async (code: string) => {
      const res = await app.request('POST', '/reactors', { body: { name: 'b', code, application: { id: actor.body.id } } })
      if (res.status !== 201) throw new Error(`${res.status} ${res.text}`)
      return app.request('POST', `/reactors/${res.body.id}/react`, { key: caller, body: { args: { id } } })
    }
    check('detokenize bridge then JSON.parse', await reactor("module.exports = async (req) => { const v = await req.svc.detokenize({ n: '{{ ' + req.args.id + \" | json: '$.number' }}\" }); return JSON.parse('x' + v.n) }"), 500)
    check('tokenize bridge, invalid card', await reactor("module.exports = async (req) => { const v = await req.svc.detokenize({ n: '{{ ' + req.args.id + \" | json: '$.number' }}\" }); const wrongCheckDigit = v.n.slice(0, -1) + String((Number(v.n.slice(-1)) + 1) % 10); return req.svc.tokenize({ type: 'card_number', data: wrongCheckDigit }) }"), 500)
    check('fetch bridge to a closed port', await reactor(`module.exports = async (req) => { const v = await req.svc.detokenize({ n: '{{ ' + req.args.id + " | json: '$.number' }}" }); return fetch('${closed}/x?n=' + v.n, { method: 'POST', headers: { 'x-card': v.n }, body: v.n }) }`), 500)
    check('fetch bridge, parse the echo', await reactor(`module.exports = async (req) => { const v = await req.svc.detokenize({ n: '{{ ' + req.args.id + " | json: '$.number' }}" }); const r = await fetch('${echo.origin}/x', { method: 'POST', body: 'x' + v.n }); return r.json() }`), 500)
  })

  t.test('ephemeral proxy bodies and headers', async () => {
    const send = (target: string, headers: string[] = []) =>
      rawRequest(app.url, { method: 'POST', path: '/proxy/charge', body: JSON.stringify({ n: number }), headers: ['SVC-API-KEY', caller, 'SVC-PROXY-URL', target, 'Content-Type', 'application/json', 'X-Card', number, ...headers] })
    const text = (res: { status: number; body: Buffer }) => ({ status: res.status, text: res.body.toString() })
    check('proxy, destination echoes', text(await send(echo.origin)), 200)
    t.ok(echo.seen.at(-1)?.body.toString().includes(CARD), 'the destination got the number')
    check('proxy, unreachable', text(await send(closed)), 502)
    check('proxy, time-out', text(await send(stalling.origin)), 504)
    check('proxy, keep-alive path unreachable', text(await send(closed, ['SVC-PROXY-CONNECTION', 'keep-alive'])), 502)
    check('proxy, bad Connection', text(await send(echo.origin, ['SVC-PROXY-CONNECTION', `keep-alive, ${number}`])), 400)
  })

  t.test('pre-configured proxy transforms', async () => {
    const transformed = async (field: string, code: string) => {
      const res = await app.request('POST', '/proxies', { body: { name: field, destination_url: echo.origin, application: { id: actor.body.id }, [field]: { code } } })
      if (res.status !== 201) throw new Error(`${res.status} ${res.text}`)
      const sent = await rawRequest(app.url, { method: 'POST', path: '/proxy', body: JSON.stringify({ n: number }), headers: ['SVC-PROXY-KEY', res.body.key, 'SVC-API-KEY', caller, 'Content-Type', 'application/json', 'X-Card', number] })
      return { status: sent.status, text: sent.body.toString() }
    }
    check('response transform, JSON.parse', await transformed('response_transform', "module.exports = async (req) => JSON.parse('x' + req.args.body.n)"), 500)
    check('response transform, TypeError', await transformed('response_transform', "'use strict'; module.exports = async (req) => { req.args.body.n.x = 1 }"), 500)
    check('response transform, bad header', await transformed('response_transform', "module.exports = async (req) => ({ headers: { ['x ' + req.args.body.n]: '1' } })"), 500)
    check('response transform, bad status', await transformed('response_transform', 'module.exports = async (req) => ({ status: req.args.body.n })'), 500)
    check('request transform, JSON.parse of expressions', await transformed('request_transform', "module.exports = async (req) => JSON.parse('x' + req.args.body.n)"), 500)
    // A header value built from the number, with a control character in it.
    check('response transform, header of the answer', await transformed('response_transform', "module.exports = async (req) => ({ headers: { ...req.args.headers, 'x-n': req.args.body.n + '\\r\\n' } })"), 500)
  })

  t.test('nothing leaked', async (t) => {
    for (const { label, status, text } of checked) {
      if (status >= 400) t.notOk(leaks(text), `${label}: the error body holds no part of the number (${text.slice(0, 160)})`)
    }
    t.ok(logLines.length > 50, `trace logging was on (${logLines.length} lines)`)
    const leaking = logLines.filter(leaks)
    t.same(leaking.map((l) => l.slice(0, 600)), [], 'no log line holds any part of the number')
  })
})

void ({} as TestApp)
