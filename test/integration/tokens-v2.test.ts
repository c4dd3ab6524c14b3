/* eslint-disable @typescript-eslint/no-explicit-any -- the test walks arbitrary JSON pages */
import t from 'tap'
import { startTestApp, type TestApp } from '../helpers/app.js'
import { appKey, card, VISA } from '../helpers/tokens.js'

/** Follows `pagination.next` from the first page to the last and returns every page. */
async function walk(app: TestApp, key: string, first: (start?: string) => Promise<{ status: number; body: any }>) {
  const pages: any[] = []
  let start: string | undefined
  for (let i = 0; i < 50; i++) {
    const res = await first(start)
    if (res.status !== 200) throw new Error(`page ${i}: ${res.status} ${JSON.stringify(res.body)}`)
    pages.push(res.body)
    start = res.body.pagination.next
    if (start === undefined) return pages
  }
  throw new Error('pagination never ended')
}

t.test('v2 tokens: cursor pagination over list and search, with v1 access rules', async (t) => {
  const app = await startTestApp(t)
  const writer = await appKey(app, { type: 'private', permissions: ['token:create', 'token:read', 'token:search', 'token:delete'] })
  const pciRevealer = await appKey(app, {
    type: 'private',
    rules: [{ priority: 1, container: '/pci/', transform: 'reveal', permissions: ['token:read', 'token:search'] }],
  })
  const redactor = await appKey(app, {
    type: 'private',
    rules: [{ priority: 1, container: '/', transform: 'redact', permissions: ['token:read', 'token:search'] }],
  })
  const created: string[] = []
  for (let i = 0; i < 7; i++) {
    const body = i % 2 === 0 ? { type: 'card', data: card(), metadata: { batch: 'b1', n: String(i) } } : { type: 'token', data: `v${i}`, metadata: { batch: 'b1', n: String(i) } }
    const res = await app.request('POST', '/tokens', { key: writer, body })
    t.equal(res.status, 201)
    created.push(res.body.id)
  }
  const pciIds = created.filter((_, i) => i % 2 === 0)

  t.test('GET /v2/tokens walks every token once, in creation order', async (t) => {
    const pages = await walk(app, writer, (start) => app.request('GET', `/v2/tokens?size=3${start ? `&start=${encodeURIComponent(start)}` : ''}`, { key: writer }))
    t.same(pages.map((p) => p.data.length), [3, 3, 1])
    t.same(pages.flatMap((p) => p.data.map((d: any) => d.id)), created)
    t.equal(pages[0].pagination.page_size, 3)
    t.notOk('next' in pages[2].pagination, 'the last page has no next')
  })

  t.test('a token created while paging shows up once, at the end', async (t) => {
    const first = await app.request('GET', '/v2/tokens?size=4', { key: writer })
    const late = await app.request('POST', '/tokens', { key: writer, body: { type: 'token', data: 'late', metadata: { batch: 'b2' } } })
    const rest = await walk(app, writer, (start) => app.request('GET', `/v2/tokens?size=4&start=${encodeURIComponent(start ?? first.body.pagination.next)}`, { key: writer }))
    const ids = [...first.body.data, ...rest.flatMap((p) => p.data)].map((d: any) => d.id)
    t.same(ids, [...created, late.body.id])
    t.equal((await app.request('DELETE', `/tokens/${late.body.id}`, { key: writer })).status, 204)
  })

  t.test('access rules scope the list and shape data as in v1', async (t) => {
    const pages = await walk(app, pciRevealer, (start) => app.request('GET', `/v2/tokens?size=2${start ? `&start=${start}` : ''}`, { key: pciRevealer }))
    const data = pages.flatMap((p) => p.data)
    t.same(data.map((d: any) => d.id), pciIds, 'only the /pci/ tokens')
    t.same(data[0].data, card(), 'reveal rule reveals')
    const masked = await app.request('GET', '/v2/tokens?type=card', { key: writer })
    t.not(masked.body.data[0].data.number, VISA, 'plain permissions mask')
    const redacted = await app.request('GET', '/v2/tokens', { key: redactor })
    t.equal(redacted.body.data.length, 7)
    t.ok(redacted.body.data.every((d: any) => !('data' in d)), 'redact omits data')
    const v1 = await app.request('GET', '/tokens?size=100', { key: pciRevealer })
    t.same(v1.body.data.map((d: any) => d.id), pciIds, 'v1 agrees')
  })

  t.test('filters: type, container, metadata (JSON, as the SDK sends it), fingerprint', async (t) => {
    const cards = await app.request('GET', '/v2/tokens?type=card', { key: writer })
    t.same(cards.body.data.map((d: any) => d.id), pciIds)
    const general = await app.request('GET', '/v2/tokens?container=/general/', { key: writer })
    t.equal(general.body.data.length, 3)
    const meta = await app.request('GET', `/v2/tokens?metadata=${encodeURIComponent(JSON.stringify({ batch: 'b1', n: '3' }))}`, { key: writer })
    t.same(meta.body.data.map((d: any) => d.id), [created[3]])
    const one = await app.request('GET', `/tokens/${created[0]}`, { key: writer })
    const fp = await app.request('GET', `/v2/tokens?fingerprint=${one.body.fingerprint}`, { key: writer })
    t.same(fp.body.data.map((d: any) => d.id), pciIds, 'same card, same fingerprint')
  })

  t.test('POST /v2/tokens/search pages by cursor with the search scope', async (t) => {
    const pages = await walk(app, writer, (start) => app.request('POST', '/v2/tokens/search', { key: writer, body: { query: 'metadata.batch:b1', size: 2, ...(start ? { start } : {}) } }))
    t.same(pages.flatMap((p) => p.data.map((d: any) => d.id)), created)
    const pci = await app.request('POST', '/v2/tokens/search', { key: pciRevealer, body: { query: 'type:token' } })
    t.same(pci.body.data, [], 'tokens outside the rules stay out')
    const all = await app.request('POST', '/v2/tokens/search', { key: pciRevealer, body: {} })
    t.same(all.body.data.map((d: any) => d.id), pciIds, 'an empty query lists what the key may search')
    const contradictory = await app.request('POST', '/v2/tokens/search', { key: writer, body: { query: 'type:card type:token' } })
    t.same(contradictory.body, { pagination: { page_size: 20 }, data: [] })
  })

  t.test('permissions as in v1', async (t) => {
    const creator = await appKey(app, { type: 'public', permissions: ['token:create'] })
    t.equal((await app.request('GET', '/v2/tokens', { key: creator })).status, 403)
    t.equal((await app.request('POST', '/v2/tokens/search', { key: creator, body: {} })).status, 403)
    t.equal((await app.request('GET', '/v2/tokens', { key: null })).status, 401)
  })

  t.test('bad input is a 400 naming the field', async (t) => {
    const cases: [string, string, unknown, string][] = [
      ['GET', '/v2/tokens?start=not-a-cursor', undefined, 'start'],
      ['GET', `/v2/tokens?start=${Buffer.from('["yesterday","x"]').toString('base64url')}`, undefined, 'start'],
      ['GET', '/v2/tokens?size=0', undefined, 'size'],
      ['GET', '/v2/tokens?size=101', undefined, 'size'],
      ['GET', '/v2/tokens?metadata=%7Bnope', undefined, 'metadata'],
      ['GET', `/v2/tokens?metadata=${encodeURIComponent('{"a":1}')}`, undefined, 'metadata'],
      ['GET', '/v2/tokens?page=2', undefined, 'page'],
      ['POST', '/v2/tokens/search', { query: 'nofield' }, 'query'],
      ['POST', '/v2/tokens/search', { start: 'x' }, 'start'],
      ['POST', '/v2/tokens/search', { page: 1 }, 'page'],
    ]
    for (const [method, path, body, field] of cases) {
      const res = await app.request(method, path, { key: writer, body })
      t.equal(res.status, 400, `${method} ${path} ${JSON.stringify(body)}`)
      t.ok(res.body.errors?.[field], `errors.${field}`)
      t.equal(res.headers.get('content-type'), 'application/problem+json')
    }
  })
})

t.test('every cursor handed out is taken back, whatever the id it ends at', async (t) => {
  const app = await startTestApp(t)
  const writer = await appKey(app, { type: 'private', permissions: ['token:create', 'token:read', 'token:search'] })
  // The longest ids by their cursor: 3 UTF-8 bytes per character, 2 once escaped, a character outside the BMP.
  const ids = ['é'.repeat(400).replace(/é/g, (c, i: number) => (i % 2 ? c : '€')), '"'.repeat(400), '😀'.repeat(200), 'after']
  for (const id of ids) t.equal((await app.request('POST', '/tokens', { key: writer, body: { id, type: 'token', data: 'x' } })).status, 201)
  const lists = {
    list: (start?: string) => app.request('GET', `/v2/tokens?size=1${start ? `&start=${encodeURIComponent(start)}` : ''}`, { key: writer }),
    search: (start?: string) => app.request('POST', '/v2/tokens/search', { key: writer, body: { size: 1, ...(start ? { start } : {}) } }),
  }
  for (const [name, page] of Object.entries(lists)) {
    const pages = await walk(app, writer, page)
    t.same(pages.flatMap((p) => p.data.map((d: any) => d.id)), ids, name)
  }
})
