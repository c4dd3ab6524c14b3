import type { AppRouter } from '../context.js'

export interface ReadinessCheck {
  name: string
  /** Resolves to 'ok' or 'degraded'; rejects when the component is down. */
  check(): Promise<'ok' | 'degraded'>
}

export function healthRoutes(router: AppRouter, checks: ReadinessCheck[]): void {
  router.get('/healthz', (ctx) => {
    ctx.body = { status: 'ok' }
  })

  router.get('/readyz', async (ctx) => {
    const results = await Promise.all(
      checks.map(async (c) => {
        try {
          return [c.name, await c.check()] as const
        } catch {
          return [c.name, 'down'] as const
        }
      }),
    )
    const components = Object.fromEntries(results)
    const down = results.some(([, s]) => s === 'down')
    const degraded = results.some(([, s]) => s === 'degraded')
    ctx.status = down ? 503 : 200
    ctx.body = { status: down ? 'down' : degraded ? 'degraded' : 'ok', components }
  })
}
