import t from 'tap'
import { startTestApp } from '../helpers/app.js'
import { appKey, createToken } from '../helpers/tokens.js'

// Query parameters and cursors whose text or instant no store can take (NUL, lone surrogates,
// years outside 1–9999) were passed on and failed in the database as 500s: each is a 400 naming
// the parameter, on PGlite and on Postgres alike.

const PROBLEM = /application\/problem\+json/
const app = await startTestApp(t)
const key = await appKey(app, { type: 'private', permissions: ['token:create', 'token:read', 'token:search'] })
await createToken(app, key, { type: 'token', data: 'x', metadata: { a: 'b' } })

const metadata = (json: string) => `/v2/tokens?metadata=${encodeURIComponent(json)}`
/** A `start` as encodeCursor makes it, from the JSON text itself (so escapes stay escapes). */
const cursor = (json: string) => Buffer.from(json).toString('base64url')
/** A lone surrogate as raw bytes (ED A0 80, as if UTF-8 could hold it): Buffer's decoder turned it into U+FFFD. */
const LONE_SURROGATE_BYTES = Buffer.from([0xed, 0xa0, 0x80])

const badCursors: [string, string][] = [
  ['NUL in the id', cursor('["2020-01-01T00:00:00Z","a\\u0000b"]')],
  ['lone surrogate in the id (JSON escape)', cursor('["2020-01-01T00:00:00Z","a\\ud800"]')],
  ['lone surrogate in the id (raw bytes)', Buffer.concat([Buffer.from('["2020-01-01T00:00:00Z","a'), LONE_SURROGATE_BYTES, Buffer.from('"]')]).toString('base64url')],
  ['year -200000', cursor('["-200000-01-01T00:00:00Z","x"]')],
  ['year 0', cursor('["0000-01-01T00:00:00Z","x"]')],
  ['year 10000', cursor('["+010000-01-01T00:00:00.000Z","x"]')],
  ['year 10000 by offset', cursor('["9999-12-31T23:59:59-23:59","x"]')],
  ['a date that is not RFC 3339', cursor('["2020-01-01","x"]')],
]

t.test('/v2/tokens: metadata filters whose JSON escapes hide NUL or lone surrogates are 400 on metadata', async (t) => {
  const cases: [string, string][] = [
    ['NUL in a value', '{"a":"\\u0000"}'],
    ['lone surrogate in a value', '{"a":"\\ud800"}'],
    ['lone low surrogate in a value', '{"a":"x\\udc00"}'],
    ['NUL in a key', '{"\\u0000":"x"}'],
    ['lone surrogate in a key', '{"\\ud800":"x"}'],
  ]
  for (const [label, json] of cases) {
    const res = await app.request('GET', metadata(json), { key })
    t.equal(res.status, 400, label)
    t.match(res.headers.get('content-type'), PROBLEM, label)
    t.ok(res.body.errors?.metadata, `${label} names metadata: ${JSON.stringify(res.body.errors)}`)
  }
  const ok = await app.request('GET', metadata('{"a":"b"}'), { key })
  t.equal(ok.status, 200)
  t.equal(ok.body.data.length, 1, 'a well-formed filter still matches')
  const pair = await app.request('GET', metadata('{"a":"\\ud83d\\ude00"}'), { key })
  t.equal(pair.status, 200, 'a surrogate pair is a character, not an error')
})

t.test('search bodies with such metadata terms are 400 on query', async (t) => {
  for (const [path, body] of [
    ['/v2/tokens/search', '{"query":"metadata.a:\\"\\u0000\\""}'],
    ['/v2/tokens/search', '{"query":"metadata.a:\\ud800"}'],
    ['/tokens/search', '{"query":"metadata.\\u0000:x"}'],
  ] as const) {
    const res = await app.request('POST', path, { key, rawBody: body, headers: { 'content-type': 'application/json' } })
    t.equal(res.status, 400, `${path} ${body}`)
    t.ok(res.body.errors?.query, `${path} ${body} names query: ${JSON.stringify(res.body.errors)}`)
  }
})

t.test('/v2/tokens: cursors with a bad id or an unstorable date are 400 on start', async (t) => {
  for (const [label, start] of badCursors) {
    const list = await app.request('GET', `/v2/tokens?start=${start}`, { key })
    t.equal(list.status, 400, `GET: ${label}`)
    t.match(list.headers.get('content-type'), PROBLEM, `GET: ${label}`)
    t.ok(list.body.errors?.start, `GET: ${label} names start: ${JSON.stringify(list.body.errors)}`)
    const search = await app.request('POST', '/v2/tokens/search', { key, body: { query: '', start } })
    t.equal(search.status, 400, `search: ${label}`)
    t.ok(search.body.errors?.start, `search: ${label} names start: ${JSON.stringify(search.body.errors)}`)
  }
  for (const [label, start] of [
    ['an issued-style cursor', cursor('["2020-01-01T00:00:00.000Z","x"]')],
    ['year 9999', cursor('["9999-12-31T23:59:59.999Z","x"]')],
    ['year 1', cursor('["0001-01-01T00:00:00.000Z","x"]')],
    ['a surrogate pair in the id', cursor('["2020-01-01T00:00:00.000Z","\\ud83d\\ude00"]')],
  ]) {
    const res = await app.request('GET', `/v2/tokens?start=${start}`, { key })
    t.equal(res.status, 200, `${label}: ${res.text}`)
  }
})

t.test('/logs: times past year 9999 UTC and out-of-range cursors are 400 naming the parameter', async (t) => {
  const logCursor = (text: string) => Buffer.from(text).toString('base64url')
  const cases: [string, string][] = [
    ['/logs?to=9999-12-31T23:59:59-23:59', 'to'],
    ['/logs?from=9999-12-31T23:59:59-23:59', 'from'],
    ['/logs?from=0000-01-01T00:00:00Z', 'from'],
    ['/logs/export?from=2020-01-01T00:00:00Z&to=9999-12-31T23:59:59-23:59', 'to'],
    ['/logs/export?from=9999-12-31T23:59:59-23:59', 'from'],
    [`/logs?cursor=${logCursor('999999999999999_1')}`, 'cursor'],
    [`/logs?cursor=${logCursor('253402300800000_1')}`, 'cursor'],
  ]
  for (const [path, field] of cases) {
    const res = await app.request('GET', path, { key: app.adminKey })
    t.equal(res.status, 400, path)
    t.match(res.headers.get('content-type'), PROBLEM, path)
    t.ok(res.body.errors?.[field], `${path} names ${field}: ${JSON.stringify(res.body.errors)}`)
  }
  for (const path of [
    `/logs?cursor=${logCursor('253402300799999_1')}`,
    `/logs?cursor=${logCursor('0_999999999999999')}`,
    '/logs?to=9999-12-31T23:59:59Z',
    '/logs/export?from=0001-01-01T00:00:00Z&to=9999-12-31T23:59:59Z',
  ]) {
    const res = await app.request('GET', path, { key: app.adminKey })
    t.equal(res.status, 200, `${path}: ${res.text.slice(0, 300)}`)
  }
})

t.test('numbers in a query are written in decimal digits: other spellings Number() reads are 400 naming the parameter', async (t) => {
  // ajv coerced any text Number() reads, so size=0x10 listed 16 and after_seq=1e1 resumed after 10.
  const spellings = ['0x10', '0b11', '0o7', '1e1', '%205', '5%20', '+5', '.5', 'Infinity', '1.9999999999999999', '2.0']
  const routes: [string, string, string][] = [
    ['/tokens?page=', 'page', key],
    ['/tokens?size=', 'size', key],
    ['/v2/tokens?size=', 'size', key],
    ['/applications?size=', 'size', app.adminKey],
    ['/reactors?page=', 'page', app.adminKey],
    ['/proxies?size=', 'size', app.adminKey],
    ['/logs?size=', 'size', app.adminKey],
    ['/logs/export?after_seq=', 'after_seq', app.adminKey],
  ]
  for (const [path, field, routeKey] of routes) {
    for (const spelling of spellings) {
      const res = await app.request('GET', `${path}${spelling}`, { key: routeKey })
      t.equal(res.status, 400, `${path}${spelling}`)
      t.match(res.headers.get('content-type'), PROBLEM, `${path}${spelling}`)
      t.ok(res.body.errors?.[field], `${path}${spelling} names ${field}: ${JSON.stringify(res.body.errors)}`)
    }
    const ok = await app.request('GET', `${path}2`, { key: routeKey })
    t.equal(ok.status, 200, `${path}2: ${ok.text.slice(0, 300)}`)
  }
  const both = await app.request('GET', '/tokens?page=0x10&size=abc', { key })
  t.equal(both.status, 400)
  t.same(Object.keys(both.body.errors ?? {}).sort(), ['page', 'size'], 'every bad parameter is named at once')
})
