import t from 'tap'
import { startTestApp } from '../helpers/app.js'
import { appKey } from '../helpers/tokens.js'

// deduplicate_token returns the existing token with the same value instead of a new one: also
// when the creates run at once, and when one /tokenize body holds the value twice.

t.test('one value, one token, however the creates arrive', async (t) => {
  const app = await startTestApp(t)
  const key = await appKey(app, { type: 'private', permissions: ['token:create', 'token:read'] })
  const token = (data: string) => ({ type: 'token', data, deduplicate_token: true })

  t.test('concurrent POST /tokens and /tokenize of one value', async (t) => {
    for (let round = 0; round < 5; round++) {
      const data = `value-${round}`
      const answers = await Promise.all([
        ...Array.from({ length: 4 }, () => app.request('POST', '/tokens', { key, body: token(data) })),
        app.request('POST', '/tokenize', { key, body: { v: token(data) } }),
      ])
      t.same(answers.map((a) => a.status), [201, 201, 201, 201, 200], `round ${round}`)
      const ids = new Set(answers.map((a) => (a.body.v ?? a.body).id as string))
      t.equal(ids.size, 1, `round ${round}: every create answered with one token`)
    }
  })

  t.test('one /tokenize body holding a value twice', async (t) => {
    const res = await app.request('POST', '/tokenize', { key, body: { a: token('twice'), b: [token('twice'), token('once')] } })
    t.equal(res.status, 200)
    t.equal(res.body.a.id, res.body.b[0].id, 'the same token')
    t.not(res.body.a.id, res.body.b[1].id)
    const again = await app.request('POST', '/tokens', { key, body: token('twice') })
    t.equal(again.body.id, res.body.a.id, 'and the one a later create finds')
  })

  t.test('the value twice in one body where the fingerprint does not look: both show the token stored', async (t) => {
    const same = { type: 'card_number', data: '4242424242424242', deduplicate_token: true }
    const cards = [
      { type: 'card', data: { number: '5555555555554444', expiration_month: 1, expiration_year: 2031, cvc: '111' }, deduplicate_token: true },
      { type: 'card', data: { number: '5555555555554444', expiration_month: 2, expiration_year: 2032, cvc: '222' }, deduplicate_token: true },
    ]
    const reader = await appKey(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read'] }] })
    const res = await app.request('POST', '/tokenize', { key: reader, body: { cards, same } })
    t.equal(res.status, 200)
    t.equal(res.body.cards[0].id, res.body.cards[1].id, 'one token')
    const stored = await app.request('GET', `/tokens/${res.body.cards[0].id}`, { key: reader })
    t.same(res.body.cards[1].data, stored.body.data, 'the second shows the data stored, not its own')
    t.same(res.body.cards[0].data, stored.body.data)
  })

  t.test('a create that only found its token changed nothing: nothing new is stored', async (t) => {
    const count = async () => Number((await app.services.store.db.knex('tokens').count({ n: '*' }).first())!.n)
    const before = await count()
    await app.request('POST', '/tokenize', { key, body: [token('twice'), token('once')] })
    t.equal(await count(), before)
  })
})
