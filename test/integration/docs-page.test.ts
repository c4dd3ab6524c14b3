import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { chromium } from 'playwright-core'
import t from 'tap'
import { startTestApp } from '../helpers/app.js'

/**
 * GET /docs in a real headless Chromium: Debian's `chromium` package (CI installs it), driven by
 * playwright-core with the system browser; nothing is downloaded. Without the browser the test
 * is skipped, so `npm test` passes on a machine with only Node and npm.
 */
const CHROMIUM = '/usr/bin/chromium'
// Without the background-networking flags Chromium tries Google's hosts at every start.
const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync']

// CI installs the browser (.ci/run), so there a missing one is a failure, not a skip.
const skip = existsSync(CHROMIUM) || process.env.CI ? false : `no ${CHROMIUM}: apt-get install -y chromium to run the browser check`

t.test('the docs page renders the operations list from local assets only', { skip }, async (t) => {
  const app = await startTestApp(t)
  const profile = mkdtempSync(path.join(os.tmpdir(), 'tessera-chromium-'))
  const context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: FLAGS, timeout: 60_000 })
  t.teardown(async () => {
    await context.close()
    rmSync(profile, { recursive: true, force: true })
  })
  const page = await context.newPage()
  const requested: string[] = []
  const problems: string[] = []
  page.on('request', (req) => void requested.push(req.url()))
  page.on('console', (msg) => void (msg.type() === 'error' && problems.push(msg.text())))
  page.on('pageerror', (err) => void problems.push(err.message))

  const res = await page.goto(`${app.url}/docs`, { waitUntil: 'load', timeout: 60_000 })
  t.equal(res?.status(), 200)
  t.match(res?.headers()['content-security-policy'], /default-src 'self'/)
  await page.waitForSelector('.opblock', { timeout: 60_000 })

  const doc = (await app.request('GET', '/openapi.json', { key: null })).body as { paths: Record<string, object> }
  const documented = Object.values(doc.paths).reduce((n, item) => n + Object.keys(item).length, 0)
  const shown = await page.$$eval('.opblock', (blocks) => blocks.map((b) => `${b.querySelector('.opblock-summary-method')?.textContent} ${b.querySelector('.opblock-summary-path')?.getAttribute('data-path')}`))
  t.equal(shown.length, documented, `every operation listed (${shown.length})`)
  t.ok(shown.includes('GET /v2/tokens'), 'GET /v2/tokens is there')
  t.ok(shown.includes('POST /applications'), 'POST /applications is there')
  t.match(await page.textContent('.info .title'), /Tessera/)

  t.same(requested.filter((url) => !url.startsWith(app.url)), [], 'nothing fetched from elsewhere')
  t.ok(requested.some((url) => url.endsWith('/openapi.json')), 'the page read /openapi.json')
  t.same(problems, [], 'no script errors or blocked resources')
})
