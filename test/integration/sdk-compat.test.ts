import { BasisTheory, BasisTheoryClient } from '@basis-theory/node-sdk'
import t from 'tap'
import { startTestApp } from '../helpers/app.js'
import { appKey, card, VISA } from '../helpers/tokens.js'

/**
 * The hosted service's official node SDK as a client of Tessera. It authenticates with a
 * `BT-API-KEY` header of its own name; it takes extra headers, so SVC-API-KEY goes there and
 * `apiKey` stays unset (the SDK then omits its own header).
 */
function sdk(baseUrl: string, key: string): BasisTheoryClient {
  return new BasisTheoryClient({ baseUrl, headers: { 'SVC-API-KEY': key }, maxRetries: 0, timeoutInSeconds: 10 })
}

t.test('the node SDK: tokens.listV2 and tokens.searchV2 against Tessera', async (t) => {
  const app = await startTestApp(t)
  const writerKey = await appKey(app, { type: 'private', permissions: ['token:create', 'token:read', 'token:search'] })
  const pciKey = await appKey(app, { type: 'private', rules: [{ priority: 1, container: '/pci/', transform: 'reveal', permissions: ['token:read', 'token:search'] }] })
  const writer = sdk(app.url, writerKey)

  const ids: string[] = []
  for (let i = 0; i < 5; i++) {
    const token = await writer.tokens.create(i < 2 ? { type: 'card', data: card(), metadata: { order: String(i) } } : { type: 'token', data: `value ${i}`, metadata: { order: String(i) } })
    ids.push(token.id!)
  }

  t.test('listV2 pages through every token by pagination.next', async (t) => {
    const page = await writer.tokens.listV2({ size: 2 })
    t.equal(page.data.length, 2)
    t.ok(page.hasNextPage())
    const seen: string[] = []
    for await (const token of page) seen.push(token.id!)
    t.same(seen, ids)
  })

  t.test('listV2 filters (type, metadata) and the key\'s access rules', async (t) => {
    const cards = await writer.tokens.listV2({ type: 'card' })
    t.same(cards.data.map((tk) => tk.id), ids.slice(0, 2))
    const byMeta = await writer.tokens.listV2({ metadata: { order: '3' } })
    t.same(byMeta.data.map((tk) => tk.id), [ids[3]])
    const pci = sdk(app.url, pciKey)
    const scoped = await pci.tokens.listV2({ size: 1 })
    const seen: BasisTheory.Token[] = []
    for await (const token of scoped) seen.push(token)
    t.same(seen.map((tk) => tk.id), ids.slice(0, 2), 'only tokens the rules reach')
    t.same(seen[0]!.data, card(), 'the reveal rule applies')
  })

  t.test('searchV2 pages a query', async (t) => {
    const page = await writer.tokens.searchV2({ query: 'type:token', size: 2 })
    const seen: string[] = []
    for await (const token of page) seen.push(token.id!)
    t.same(seen, ids.slice(2))
    const masked = await writer.tokens.searchV2({ query: `id:${ids[0]}` })
    t.not((masked.data[0]!.data as { number: string }).number, VISA, 'plain permissions mask')
  })

  t.test('errors arrive as the SDK\'s typed errors', async (t) => {
    const creator = sdk(app.url, await appKey(app, { type: 'public', permissions: ['token:create'] }))
    const failure = (p: Promise<unknown>) => p.then(() => undefined, (err: unknown) => err)
    t.type(await failure(creator.tokens.listV2()), BasisTheory.ForbiddenError)
    t.type(await failure(sdk(app.url, 'key_unknown').tokens.searchV2({ query: '' })), BasisTheory.UnauthorizedError)
    const invalid = await failure(writer.tokens.searchV2({ query: 'bogus' }))
    t.type(invalid, BasisTheory.BadRequestError)
    t.match((invalid as BasisTheory.BadRequestError).body, { status: 400, errors: { query: [String] } }, 'the problem body reaches the caller')
  })
})
