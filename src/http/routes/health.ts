import type { AppRouter } from '../context.js'

export interface ReadinessCheck {
  name: string
  /** Resolves to 'ok' or 'degraded'; rejects when the component is down. */
  check(): Promise<'ok' | 'degraded'>
}

/**
 * `/healthz` (the process answers) and `/readyz` (it can serve: every component answered within
 * `timeoutMs`, and it is not shutting down). `/readyz` never waits longer than its own bound:
 * a component that has not answered by then is `down`.
 */
export function healthRoutes(router: AppRouter, checks: ReadinessCheck[], timeoutMs: number): void {
  router.get('/healthz', (ctx) => {
    ctx.body = { status: 'ok' }
  })

  router.get('/readyz', async (ctx) => {
    const results = await Promise.all(checks.map(async (c) => [c.name, await within(c.check(), timeoutMs)] as const))
    const components = Object.fromEntries(results)
    const down = results.some(([, s]) => s === 'down')
    const degraded = results.some(([, s]) => s === 'degraded')
    ctx.status = down ? 503 : 200
    ctx.body = { status: down ? 'down' : degraded ? 'degraded' : 'ok', components }
  })
}

function within(check: Promise<'ok' | 'degraded'>, timeoutMs: number): Promise<'ok' | 'degraded' | 'down'> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<'down'>((resolve) => (timer = setTimeout(() => resolve('down'), timeoutMs)))
  return Promise.race([check.catch(() => 'down' as const), late]).finally(() => clearTimeout(timer))
}

/** One probe in flight at a time: while the database stalls, probes must not pile up on its pool. */
export function singleFlight<T>(fn: () => Promise<T>): () => Promise<T> {
  let running: Promise<T> | undefined
  return () => (running ??= fn().finally(() => (running = undefined)))
}
