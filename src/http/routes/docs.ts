import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import { AppError } from '../../errors/index.js'
import type { AppRouter } from '../context.js'
import { INIT_JS, PAGE_HTML } from '../docs/page.js'
import { buildOpenApi, type ApiSurface } from '../openapi/document.js'

const swaggerDir = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'))

/** Every file the page may load, all served from here: self-hosted installs are often offline. */
const ASSETS: Record<string, { file?: string; text?: string; type: string }> = {
  'swagger-ui.css': { file: path.join(swaggerDir, 'swagger-ui.css'), type: 'text/css; charset=utf-8' },
  'swagger-ui-bundle.js': { file: path.join(swaggerDir, 'swagger-ui-bundle.js'), type: 'text/javascript; charset=utf-8' },
  'favicon-32x32.png': { file: path.join(swaggerDir, 'favicon-32x32.png'), type: 'image/png' },
  'init.js': { text: INIT_JS, type: 'text/javascript; charset=utf-8' },
}

// Swagger UI styles some elements inline; everything else must come from this origin.
const PAGE_POLICY = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"

/** `GET /openapi.json` and the `GET /docs` page rendering it; no key needed. Files are read once. */
export function docsRoutes(router: AppRouter, surface: ApiSurface): void {
  let document: string | undefined
  const files = new Map<string, Buffer>()
  const read = (file: string) => {
    let content = files.get(file)
    if (!content) files.set(file, (content = readFileSync(file)))
    return content
  }

  router.get('/openapi.json', (ctx) => {
    ctx.type = 'application/json'
    ctx.body = document ??= JSON.stringify(buildOpenApi(surface))
  })

  router.get('/docs', (ctx) => {
    ctx.set('Content-Security-Policy', PAGE_POLICY)
    ctx.type = 'text/html; charset=utf-8'
    ctx.body = PAGE_HTML
  })

  router.get('/docs/:asset', (ctx) => {
    const asset = Object.hasOwn(ASSETS, ctx.params.asset!) ? ASSETS[ctx.params.asset!] : undefined
    if (!asset) throw new AppError('not_found', { detail: 'No such asset of the docs page.' })
    ctx.set('Cache-Control', 'public, max-age=3600')
    ctx.set('X-Content-Type-Options', 'nosniff')
    ctx.type = asset.type
    ctx.body = asset.text ?? read(asset.file!)
  })
}
