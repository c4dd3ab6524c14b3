import t from 'tap'
import { startTestApp } from '../helpers/app.js'
import { testClock } from '../helpers/clock.js'
import { appKey, card } from '../helpers/tokens.js'

// deduplicate_token returns an existing token only if it lives at least as long as the caller
// asked (no expires_at: only a token that never expires), so no caller's token vanishes early.

t.test('deduplication never answers with a token that expires sooner than asked', async (t) => {
  const clock = testClock()
  const app = await startTestApp(t, {}, { clock })
  const grants = { type: 'private', permissions: ['token:create', 'token:read'] }
  const [a, b] = [await appKey(app, grants), await appKey(app, grants)]
  const inSeconds = (s: number) => new Date(clock() + s * 1000).toISOString()
  const cardOf = (number: string, expires_at?: string) => ({ type: 'card', data: card(number), deduplicate_token: true, ...(expires_at && { expires_at }) })
  const create = async (key: string, body: Record<string, unknown>) => {
    const res = await app.request('POST', '/tokens', { key, body })
    t.equal(res.status, 201, 'created')
    return res.body as { id: string; expires_at: string | null }
  }
  const tokenize = async (key: string, body: unknown) => {
    const res = await app.request('POST', '/tokenize', { key, body })
    t.equal(res.status, 200, 'tokenized')
    return res.body
  }
  const lives = async (id: string) => (await app.request('GET', `/tokens/${id}`, { key: b })).status === 200

  // POST /tokens: A's 60 s token, then the same value from B without expiry, for 30 s and for 120 s.
  const short = await create(a, cardOf('4242424242424242', inSeconds(60)))
  const forever = await create(b, cardOf('4242424242424242'))
  t.not(forever.id, short.id, 'no expiry asked: not the token that expires in 60 s')
  t.equal(forever.expires_at ?? null, null)
  t.equal((await create(b, cardOf('4242424242424242', inSeconds(30)))).id, short.id, 'one that lives long enough is found')
  const shortTime = await create(b, cardOf('5555555555554444', inSeconds(60)))
  const longer = await create(a, cardOf('5555555555554444', inSeconds(120)))
  t.not(longer.id, shortTime.id, 'asked for 120 s: not the 60 s one')
  t.equal((await create(a, cardOf('5555555555554444', inSeconds(90)))).id, longer.id)

  // POST /tokenize, the same way.
  const shortTokenized = (await tokenize(a, { v: cardOf('4000056655665556', inSeconds(60)) })).v
  const foreverTokenized = (await tokenize(b, { v: cardOf('4000056655665556') })).v
  t.not(foreverTokenized.id, shortTokenized.id, '/tokenize: not the token that expires in 60 s')

  // One body holding a value for 60 s and for ever: one token, the one that never expires.
  const both = await tokenize(b, { soon: cardOf('6011111111111117', inSeconds(60)), never: cardOf('6011111111111117') })
  t.equal(both.soon.id, both.never.id, 'one value in one body is one token')
  t.equal(both.never.expires_at ?? null, null, 'which lives as long as the longest asked')

  clock.advance(61_000)
  t.notOk(await lives(short.id), "A's token has expired")
  t.ok(await lives(forever.id), "B's token has not")
  t.notOk(await lives(shortTime.id))
  t.ok(await lives(longer.id), 'the 120 s token lives on')
  t.ok(await lives(foreverTokenized.id), "B's tokenized card has not")
  t.ok(await lives(both.never.id), 'nor the one token of that body')
})
