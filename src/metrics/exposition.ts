import http from 'node:http'
import type { Logger } from 'pino'
import type { Metrics } from './metrics.js'

/** The Prometheus text exposition of this process's registry. */
export async function renderMetrics(metrics: Metrics): Promise<{ contentType: string; body: string }> {
  return { contentType: metrics.registry.contentType, body: await metrics.registry.metrics() }
}

/**
 * `SVC_METRICS=port`: `GET /metrics` on a listener of its own (no key: bind it where only the
 * scraper reaches, 127.0.0.1 by default). Anything else there is 404.
 */
export async function startMetricsServer(metrics: Metrics, host: string, port: number, logger: Logger): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    if (req.method !== 'GET' || (req.url ?? '').split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'Content-Type': 'text/plain' }).end('not found\n')
      return
    }
    renderMetrics(metrics).then(
      ({ contentType, body }) => res.writeHead(200, { 'Content-Type': contentType }).end(body),
      (err: unknown) => {
        logger.error({ err }, 'metrics collection failed')
        res.writeHead(500, { 'Content-Type': 'text/plain' }).end('metrics collection failed\n')
      },
    )
  })
  server.requestTimeout = 10_000
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => resolve())
  })
  return server
}
