import t from 'tap'
import { assertProxyError, rawRequest, startProxyApp, type RawRequest } from '../helpers/proxy.js'
import { startStub } from '../helpers/stub-server.js'
import { appKey, createToken } from '../helpers/tokens.js'
import { countQueries } from '../helpers/audit.js'

const CARD = { number: '4242424242424242', expiration_month: 12, expiration_year: 2030, cvc: '123' }

t.test('ephemeral proxy: detokenization', async (t) => {
  const app = await startProxyApp(t, { SVC_MAX_EXPRESSION_TOKENS: '6' })
  const stub = await startStub(t)
  const writer = await appKey(app, { name: 'writer', type: 'private', permissions: ['token:create'] })
  const tok = {
    text: await createToken(app, writer, { type: 'token', data: 'secret-4242' }),
    number: await createToken(app, writer, { type: 'token', data: 42 }),
    object: await createToken(app, writer, { type: 'token', data: { a: 1, b: [true, null], s: 'x' } }),
    card: await createToken(app, writer, { type: 'card', data: CARD }),
    crlf: await createToken(app, writer, { type: 'token', data: 'evil\r\nX-Injected: 1' }),
    // The JSON API refuses NUL now (400), but tokens stored before that may hold one: stored
    // through the vault directly, the proxy must still refuse to put it into a header.
    nul: (await app.services.tokens.createToken(await app.services.authenticator.authenticate(writer), { type: 'token', data: 'evil\u0000tail' })).record.id,
    special: await createToken(app, writer, { type: 'token', data: 'a b&c=d/é+"q"\\' }),
  }
  const generalOnly = await appKey(app, {
    name: 'general only',
    type: 'private',
    rules: [{ priority: 1, container: '/general/', transform: 'reveal', permissions: ['token:use'] }],
  })
  const masked = await appKey(app, {
    name: 'masked',
    type: 'private',
    rules: [{ priority: 1, container: '/pci/', transform: 'mask', permissions: ['token:use'] }],
  })
  const send = (req: RawRequest, key = app.useKey) =>
    rawRequest(app.url, { method: 'POST', path: '/proxy', ...req, headers: ['SVC-API-KEY', key, 'SVC-PROXY-URL', stub.origin, ...(req.headers ?? [])] })
  const json = (body: string, key?: string) => send({ body, headers: ['Content-Type', 'application/json'] }, key)

  t.test('JSON: a lone expression keeps the data type, others interpolate, the rest is untouched', async (t) => {
    const body = [
      '{ "s": "{{ ' + tok.text + ' }}",',
      '  "n": "{{' + tok.number + '}}", "o": "{{ ' + tok.object + ' }}",',
      '  "inside": "card {{ ' + tok.text + ' }} end", "num_in_text": "#{{ ' + tok.number + ' }}",',
      '  "keep": 10.50, "big": 12345678901234567890, "esc": "\\u007b\\"{{ ' + tok.special + ' }}\\"",',
      '  "{{ ' + tok.text + ' }}": "keys are not evaluated", "arr": ["{{ ' + tok.number + ' }}", 1e2] }',
    ].join('\n')
    const res = await json(body)
    t.equal(res.status, 200)
    const expected = [
      '{ "s": "secret-4242",',
      '  "n": 42, "o": {"a":1,"b":[true,null],"s":"x"},',
      '  "inside": "card secret-4242 end", "num_in_text": "#42",',
      '  "keep": 10.50, "big": 12345678901234567890, "esc": ' + JSON.stringify('{"a b&c=d/é+"q"\\"') + ',',
      '  "{{ ' + tok.text + ' }}": "keys are not evaluated", "arr": [42, 1e2] }',
    ].join('\n')
    t.equal(stub.seen.at(-1)!.body.toString(), expected, 'only the expression literals changed, byte for byte')
    t.equal(stub.seen.at(-1)!.headers['content-length'], String(Buffer.byteLength(expected)), 'Content-Length recomputed')
  })

  t.test('JSON: filters', async (t) => {
    await json(`{"number": "{{ ${tok.card} | json: '$.number' }}", "last4": "{{ ${tok.card} | json: '$.number' | last4 }}", "month": "{{ ${tok.card} | json: '$.expiration_month' }}"}`)
    t.same(JSON.parse(stub.seen.at(-1)!.body.toString()), { number: CARD.number, last4: '4242', month: 12 })
  })

  t.test('text, XML and form bodies by substitution; form values URL-encoded', async (t) => {
    await send({ body: `pan={{ ${tok.card} | json: '$.number' }};n={{${tok.number}}}`, headers: ['Content-Type', 'text/plain; charset=utf-8'] })
    t.equal(stub.seen.at(-1)!.body.toString(), `pan=${CARD.number};n=42`)
    await send({ body: `<card><n>{{ ${tok.text} }}</n><o>{{ ${tok.object} }}</o></card>`, headers: ['Content-Type', 'application/xml'] })
    // Escaped as XML text: `"` is &quot;, which the destination's parser reads back as `"`.
    t.equal(stub.seen.at(-1)!.body.toString(), '<card><n>secret-4242</n><o>{&quot;a&quot;:1,&quot;b&quot;:[true,null],&quot;s&quot;:&quot;x&quot;}</o></card>')
    await send({ body: `a={{ ${tok.special} }}&b=x+y`, headers: ['Content-Type', 'application/x-www-form-urlencoded'] })
    const form = stub.seen.at(-1)!.body.toString()
    t.equal(form, `a=${encodeURIComponent('a b&c=d/é+"q"\\')}&b=x+y`)
    t.equal(new URLSearchParams(form).get('a'), 'a b&c=d/é+"q"\\', 'the destination decodes the original value')
  })

  t.test('binary and unknown content types are never evaluated', async (t) => {
    for (const type of [undefined, 'application/octet-stream', 'application/pdf']) {
      const body = `raw {{ ${tok.text} }} bytes`
      const res = await send({ body, headers: type ? ['Content-Type', type] : [] })
      t.equal(res.status, 200)
      t.equal(stub.seen.at(-1)!.body.toString(), body, String(type))
    }
  })

  t.test('header values; body and headers with one vault query', async (t) => {
    await json('{}')
    // The vault's queries; the audit log's batch (its own transaction) is not the vault.
    const queries = countQueries(t, app)
    const res = await send({
      body: `{"a": "{{ ${tok.text} }}"}`,
      headers: ['Content-Type', 'application/json', 'Authorization', `Bearer {{ ${tok.text} }}`, 'X-Num', `n={{ ${tok.number} }}`, 'X-Plain', '{ not } an expression'],
    })
    t.equal(res.status, 200)
    // Tokens used earlier in this file are served from the token cache: at most one query.
    t.ok(queries() <= 1, 'at most one query for every token of the request')
    const seen = stub.seen.at(-1)!
    t.equal(seen.headers.authorization, 'Bearer secret-4242')
    t.equal(seen.headers['x-num'], 'n=42')
    t.equal(seen.headers['x-plain'], '{ not } an expression')
    t.equal(seen.body.toString(), '{"a": "secret-4242"}')
  })

  t.test('access rule transforms shape the data', async (t) => {
    const res = await json(`{"card": "{{ ${tok.card} }}"}`, masked)
    t.equal(res.status, 200)
    const sent = JSON.parse(stub.seen.at(-1)!.body.toString())
    t.not(sent.card.number, CARD.number, 'the number is masked')
    t.match(sent.card.number, /4242$/)
    t.notMatch(stub.seen.at(-1)!.body.toString(), /4242424242424242/)
  })

  t.test('refusals: 400 / 403 as proxy_error, nothing sent', async (t) => {
    const before = stub.seen.length
    const cases: [string, () => ReturnType<typeof send>, number][] = [
      ['unknown token', () => json('{"a": "{{ tok_does_not_exist }}"}'), 400],
      ['unknown token in a header', () => send({ headers: ['X-A', '{{ tok_does_not_exist }}'] }), 400],
      ['token outside the caller\'s containers', () => json(`{"a": "{{ ${tok.card} }}"}`, generalOnly), 403],
      ['one forbidden among allowed', () => json(`{"a": "{{ ${tok.text} }}", "b": "{{ ${tok.card} }}"}`, generalOnly), 403],
      ['malformed expression', () => json('{"a": "{{ unterminated"}'), 400],
      ['unknown filter', () => json(`{"a": "{{ ${tok.text} | no_such_filter }}"}`), 400],
      ['filter that cannot apply', () => json(`{"a": "{{ ${tok.object} | last4 }}"}`), 400],
      ['malformed in a header', () => send({ headers: ['X-A', '{{ }}'] }), 400],
      ['malformed in a text body', () => send({ body: 'a {{ b', headers: ['Content-Type', 'text/plain'] }), 400],
      ['declared JSON, not JSON', () => json(`{"a": {{ ${tok.number} }}}`), 400],
      ['CR/LF substituted into a header', () => send({ headers: ['X-Evil', `{{ ${tok.crlf} }}`] }), 400],
      ['NUL substituted into a header', () => send({ headers: ['X-Evil', `x{{ ${tok.nul} }}`] }), 400],
    ]
    for (const [label, run, status] of cases) {
      const res = await run()
      assertProxyError(t, res, status, label)
      t.notMatch(res.body.toString(), /secret-4242|4242424242424242/, `${label}: no token data in the error`)
    }
    t.equal(stub.seen.length, before, 'not one refused request reached the destination')
  })

  t.test('a substituted CR/LF is fine in a body', async (t) => {
    await send({ body: `v={{ ${tok.crlf} }}`, headers: ['Content-Type', 'text/plain'] })
    t.equal(stub.seen.at(-1)!.body.toString(), 'v=evil\r\nX-Injected: 1')
  })

  t.test('at most SVC_MAX_EXPRESSION_TOKENS distinct tokens, body and headers counted together', async (t) => {
    const five = [tok.text, tok.number, tok.object, tok.card, tok.special]
    const atLimit = await send({
      body: JSON.stringify(Object.fromEntries(five.map((id, i) => [`k${i}`, `{{ ${id} }}`]))),
      headers: ['Content-Type', 'application/json', 'X-A', `{{ ${tok.text} }}`, 'X-B', `{{ ${tok.number} }}`],
    })
    t.equal(atLimit.status, 200, 'five distinct, repeated across parts, is fine')
    const before = stub.seen.length
    const over = await send({
      body: JSON.stringify({ a: `{{ ${tok.text} }}`, b: `{{ ${tok.number} }}`, c: `{{ ${tok.object} }}`, d: `{{ ${tok.card} }}` }),
      headers: ['Content-Type', 'application/json', 'X-A', `{{ ${tok.special} }}`, 'X-B', `{{ ${tok.crlf} }}`, 'X-C', `{{ ${tok.nul} }}`],
    })
    assertProxyError(t, over, 400)
    t.match(over.json.proxy_error.detail, /too many tokens/)
    t.equal(stub.seen.length, before)
  })

  t.test('the destination\'s answer is never evaluated', async (t) => {
    const echo = await startStub(t, (_req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/json', 'X-Echo': `{{ ${tok.text} }}` })
      res.end(`{"a": "{{ ${tok.text} }}"}`)
    })
    const res = await rawRequest(app.url, { path: '/proxy', headers: ['SVC-API-KEY', app.useKey, 'SVC-PROXY-URL', echo.origin] })
    t.equal(res.body.toString(), `{"a": "{{ ${tok.text} }}"}`)
    t.equal(res.headers['x-echo'], `{{ ${tok.text} }}`)
  })
})
