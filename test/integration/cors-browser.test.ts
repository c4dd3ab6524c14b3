import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { chromium, type BrowserContext } from 'playwright-core'
import t from 'tap'
import { startTestApp } from '../helpers/app.js'
import { appKey, card } from '../helpers/tokens.js'

/**
 * A public key used as SPEC 2.2 means it, from a browser page on another origin: Debian's
 * `chromium` (CI installs it) driven by playwright-core, as in docs-page.test.ts.
 */
const CHROMIUM = '/usr/bin/chromium'
const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync']
const skip = existsSync(CHROMIUM) || process.env.CI ? false : `no ${CHROMIUM}: apt-get install -y chromium to run the browser check`

/** A shop's page: an empty document on its own origin (another port of 127.0.0.1). */
async function startPage(t: { teardown(fn: () => unknown): void }): Promise<string> {
  const server = http.createServer((_req, res) => res.writeHead(200, { 'Content-Type': 'text/html' }).end('<!doctype html><title>shop</title>'))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise((resolve) => server.close(resolve)))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

interface PageAnswer {
  status?: number
  id?: string
  remaining?: string | null
  problem?: string
  error?: string
}

/** Runs the page's own fetch to Tessera, as the shop's script would. */
function tokenizeFrom(context: BrowserContext, pageUrl: string, apiUrl: string, key: string): Promise<PageAnswer> {
  return context.newPage().then(async (page) => {
    await page.goto(pageUrl, { timeout: 60_000 })
    return page.evaluate(
      async ({ apiUrl, key, data }) => {
        try {
          const res = await fetch(`${apiUrl}/tokens`, { method: 'POST', headers: { 'SVC-API-KEY': key, 'Content-Type': 'application/json' }, body: JSON.stringify({ type: 'card', data, containers: ['/cards/'] }) })
          const body = (await res.json()) as { id?: string; title?: string }
          return { status: res.status, id: body.id, remaining: res.headers.get('RateLimit-Remaining'), problem: body.title }
        } catch (err) {
          return { error: String(err) }
        }
      },
      { apiUrl, key, data: card() },
    )
  })
}

t.test('a page of an allowed origin tokenizes with a public key; another origin cannot even send', { skip }, async (t) => {
  const shop = await startPage(t)
  const elsewhere = await startPage(t)
  const app = await startTestApp(t, { SVC_CORS_ORIGINS: shop })
  const publicKey = await appKey(app, { type: 'public', rules: [{ description: 'collect', priority: 1, container: '/cards/', transform: 'redact', permissions: ['token:create'] }] })
  const profile = mkdtempSync(path.join(os.tmpdir(), 'tessera-chromium-'))
  const context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: FLAGS, timeout: 60_000 })
  t.teardown(async () => {
    await context.close()
    rmSync(profile, { recursive: true, force: true })
  })

  const made = await tokenizeFrom(context, shop, app.url, publicKey)
  t.equal(made.status, 201, JSON.stringify(made))
  t.match(made.id, /^[0-9a-f-]{36}$/, 'the page reads the answer')
  t.match(made.remaining, /^\d+$/, 'and the exposed RateLimit-Remaining')

  const wrongKey = await tokenizeFrom(context, shop, app.url, 'tsr_pub_notakey')
  t.same([wrongKey.status, wrongKey.problem], [401, 'Authentication is required.'], 'a problem is readable too')

  const blocked = await tokenizeFrom(context, elsewhere, app.url, publicKey)
  t.match(blocked.error, /TypeError/, 'the browser refuses the call')
  const reader = await appKey(app, { type: 'private', rules: [{ description: 'read', priority: 1, container: '/cards/', transform: 'redact', permissions: ['token:read'] }] })
  const tokens = await app.request('GET', '/v2/tokens?size=100', { key: reader })
  t.equal(tokens.body.data.length, 1, 'the preflight was refused, so the request was never sent: one token, the allowed page\'s')
})
