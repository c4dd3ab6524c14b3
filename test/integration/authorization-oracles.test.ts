import type { Test } from 'tap'
import t from 'tap'
import { startTestApp, type TestApp } from '../helpers/app.js'
import { card, VISA } from '../helpers/tokens.js'

// Gaps found after issue 12's first pass, each tried as an attacker holding one narrow key:
// equality tests of the data (search terms, fingerprint filters, deduplication) on tokens the
// key's read redacts, moving a token into a container the key reads, and full tokens inside
// /tokenize that skipped the checks POST /tokens makes.

const ALL_TOKEN = ['token:create', 'token:read', 'token:update', 'token:search', 'token:delete', 'token:use']

async function application(app: TestApp, body: object): Promise<{ id: string; key: string }> {
  const res = await app.request('POST', '/applications', { body: { name: 'app', ...body } })
  if (res.status !== 201) throw new Error(`creating an Application failed: ${res.status} ${res.text}`)
  return { id: res.body.id, key: res.body.key }
}

const patch = (app: TestApp, key: string, id: string, body: object) =>
  app.request('PATCH', `/tokens/${id}`, { key, rawBody: JSON.stringify(body), headers: { 'content-type': 'application/merge-patch+json' } })

function assertForbidden(t: Test, res: { status: number; headers: Headers; body: { detail?: string } }, names: RegExp, label: string) {
  t.equal(res.status, 403, `${label}: 403`)
  t.equal(res.headers.get('content-type'), 'application/problem+json', `${label}: problem+json`)
  t.match(res.body.detail, names, `${label}: names what is missing`)
}

t.test('authorization oracles and moves', async (t) => {
  const app = await startTestApp(t)
  const writer = await application(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ALL_TOKEN }] })
  const secret = await app.request('POST', '/tokens', { key: writer.key, body: { type: 'card', data: card(), search_indexes: ['{{ data.number }}'] } })
  t.equal(secret.status, 201)
  const { id, fingerprint } = secret.body as { id: string; fingerprint: string }

  t.test('equality tests need the data shown at least masked', async (t) => {
    // Search reaches /pci/ (the redact rule does not list token:search), but read redacts it there.
    const key = (
      await application(app, {
        type: 'private',
        rules: [
          { priority: 1, container: '/pci/', transform: 'redact', permissions: ['token:read'] },
          { priority: 2, container: '/', transform: 'reveal', permissions: ['token:read', 'token:search'] },
        ],
      })
    ).key
    const listed = await app.request('POST', '/tokens/search', { key, body: { query: `id:${id}` } })
    t.equal(listed.body.pagination.total_items, 1, 'the token itself is in search reach')
    t.notOk('fingerprint' in listed.body.data[0], 'shown redacted')
    for (const [label, res] of [
      ['data: term', await app.request('POST', '/tokens/search', { key, body: { query: `data:${VISA}` } })],
      ['fingerprint: term', await app.request('POST', '/tokens/search', { key, body: { query: `fingerprint:${fingerprint}` } })],
      ['v2 data: term', await app.request('POST', '/v2/tokens/search', { key, body: { query: `data:${VISA}` } })],
    ] as const) {
      t.equal(res.status, 200, label)
      t.same(res.body.data, [], `${label} does not confirm the number of a token read redacts`)
    }
    const byFingerprint = await app.request('GET', `/v2/tokens?fingerprint=${fingerprint}`, { key })
    t.equal(byFingerprint.status, 200)
    t.same(byFingerprint.body.data, [], 'nor does the v2 fingerprint filter')
    const unfiltered = await app.request('GET', `/v2/tokens?id=${id}`, { key })
    t.same(unfiltered.body.data.map((x: { id: string }) => x.id), [id], 'the token is listed without the equality filter')

    const masked = (await application(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'mask', permissions: ['token:read', 'token:search'] }] })).key
    t.same((await app.request('POST', '/tokens/search', { key: masked, body: { query: `data:${VISA}` } })).body.data.map((x: { id: string }) => x.id), [id], 'a masked reader may test it')
    t.same((await app.request('GET', `/v2/tokens?fingerprint=${fingerprint}`, { key: masked })).body.data.map((x: { id: string }) => x.id), [id])
  })

  t.test('deduplication needs the existing token shown at least masked', async (t) => {
    const redacted = await application(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'redact', permissions: ['token:read', 'token:create'] }] })
    const res = await app.request('POST', '/tokens', { key: redacted.key, body: { type: 'card', data: card(), deduplicate_token: true } })
    t.equal(res.status, 201)
    t.not(res.body.id, id, 'a new token: a redacted reader learns nothing from deduplication')
    const masked = await application(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'mask', permissions: ['token:read', 'token:create'] }] })
    const again = await app.request('POST', '/tokens', { key: masked.key, body: { type: 'card', data: card(), deduplicate_token: true } })
    t.equal(again.body.id, id, 'a masked reader gets the existing token')
    t.equal(again.body.data.number, 'XXXXXXXXXXXX4242', 'shown masked')
  })

  t.test('moving a token never shows the mover more', async (t) => {
    const moved = await app.request('POST', '/tokens', { key: writer.key, body: { type: 'card', data: card() } })
    const mover = await application(app, {
      type: 'private',
      rules: [
        { priority: 1, container: '/', transform: 'reveal', permissions: ['token:update'] },
        { priority: 2, container: '/general/', transform: 'reveal', permissions: ['token:read'] },
      ],
    })
    t.equal((await app.request('GET', `/tokens/${moved.body.id}`, { key: mover.key })).status, 403, 'cannot read it in /pci/high/')
    const res = await patch(app, mover.key, moved.body.id, { containers: ['/general/'] })
    assertForbidden(t, res, /token:read/, 'moving it into /general/')
    t.notMatch(res.text, VISA)
    t.equal((await app.request('GET', `/tokens/${moved.body.id}`, { key: mover.key })).status, 403, 'still unreadable')
    t.same((await app.request('GET', `/tokens/${moved.body.id}`, { key: writer.key })).body.containers, ['/pci/high/'], 'nothing stored')

    // Removing a container can lift an earlier rule too.
    const both = await app.request('POST', '/tokens', { key: writer.key, body: { type: 'card', data: card(), containers: ['/pci/high/', '/general/'] } })
    const unshadow = await application(app, {
      type: 'private',
      rules: [
        { priority: 1, container: '/pci/', transform: 'redact', permissions: ['token:read'] },
        { priority: 2, container: '/', transform: 'reveal', permissions: ['token:read', 'token:update'] },
      ],
    })
    assertForbidden(t, await patch(app, unshadow.key, both.body.id, { containers: ['/general/'] }), /token:read/, 'dropping /pci/high/')
    t.notOk('data' in (await app.request('GET', `/tokens/${both.body.id}`, { key: unshadow.key })).body, 'still redacted')

    const deleter = await application(app, {
      type: 'private',
      rules: [
        { priority: 1, container: '/', transform: 'reveal', permissions: ['token:update'] },
        { priority: 2, container: '/general/', transform: 'redact', permissions: ['token:delete'] },
      ],
    })
    assertForbidden(t, await patch(app, deleter.key, moved.body.id, { containers: ['/general/'] }), /token:delete/, 'moving it where the key may delete it')

    // Reclassifying stays possible: create and update on the new container are not raised reach.
    const reclassifier = await application(app, {
      type: 'private',
      rules: [
        { priority: 1, container: '/', transform: 'mask', permissions: ['token:update'] },
        { priority: 2, container: '/general/', transform: 'reveal', permissions: ['token:create'] },
      ],
    })
    t.equal((await patch(app, reclassifier.key, both.body.id, { containers: ['/general/'] })).status, 200, 'a key that only updates and creates may move it')
    const classifier = await application(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'mask', permissions: ['token:read', 'token:update'] }] })
    const ok = await patch(app, classifier.key, moved.body.id, { containers: ['/general/'] })
    t.equal(ok.status, 200, 'a move that shows the mover no more is allowed')
    t.same(ok.body.containers, ['/general/'])
  })

  t.test('full tokens inside /tokenize are checked like POST /tokens', async (t) => {
    const pub = await application(app, { type: 'public', rules: [{ priority: 1, container: '/general/', transform: 'redact', permissions: ['token:create'] }] })
    const cases: [string, object][] = [
      ['no containers', { containers: [] }],
      ['containers not an array', { containers: '/general/' }],
      ['a repeated container', { containers: ['/general/', '/general/'] }],
      ['more than 10 containers', { containers: Array.from({ length: 11 }, (_, i) => `/general/c${i}/`) }],
      ['metadata not an object', { metadata: 'x' }],
      ['metadata values not strings', { metadata: { a: 1 } }],
      ['search_indexes not an array', { search_indexes: '{{ data }}' }],
      ['fingerprint_expression not a string', { fingerprint_expression: 5 }],
      ['expires_at not a date-time', { expires_at: 'tomorrow' }],
      ['id not a string', { id: 5 }],
    ]
    for (const [label, extra] of cases) {
      const res = await app.request('POST', '/tokenize', { key: pub.key, body: { c: { type: 'token', data: 'x', containers: ['/general/'], ...extra } } })
      t.equal(res.status, 400, `${label}: 400`)
      t.equal(res.headers.get('content-type'), 'application/problem+json', `${label}: problem+json`)
      t.ok(Object.keys(res.body.errors ?? {}).some((f) => f.startsWith('c.')), `${label}: names the field`)
    }
    const list = await app.request('GET', '/tokens?size=100', { key: writer.key })
    t.notOk(
      list.body.data.some((tok: { containers: string[] }) => tok.containers.length === 0),
      'no token without a container was stored',
    )
  })

  t.test('a mask shows characters, never whole elements of an array', async (t) => {
    const data = { secrets: ['first-whole-secret', 'second-whole-secret'] }
    for (const mask of ['{{ data.secrets | slice: -1, 1 }}', '{{ data.secrets | slice: -1, 1 | to_string }}', '{{ data | json: "$.secrets" | slice: -2, 2 }}']) {
      const res = await app.request('POST', '/tokens', { key: writer.key, body: { type: 'token', data, mask } })
      t.equal(res.status, 400, `${mask}: refused`)
      t.ok(res.body.errors?.mask, `${mask}: names the mask`)
    }
    const ok = await app.request('POST', '/tokens', { key: writer.key, body: { type: 'token', data, mask: '{{ data.secrets | to_string | slice: -4, 4 }}' } })
    t.equal(ok.status, 201, 'slicing the text is within the last four characters')
    const reader = await application(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'mask', permissions: ['token:read'] }] })
    t.equal((await app.request('GET', `/tokens/${ok.body.id}`, { key: reader.key })).body.data, 'et"]')
  })
})
