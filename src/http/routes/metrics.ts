import type { Metrics } from '../../metrics/metrics.js'
import { renderMetrics } from '../../metrics/exposition.js'
import type { AppRouter } from '../context.js'
import { requireOperator } from './tenants.js'

/** `SVC_METRICS=operator`: `GET /metrics` on the API port, with the operator key in SVC-API-KEY. */
export function metricsRoute(router: AppRouter, metrics: Metrics, operatorKey: string | undefined): void {
  router.get('/metrics', requireOperator(operatorKey), async (ctx) => {
    const { contentType, body } = await renderMetrics(metrics)
    ctx.type = contentType
    ctx.body = body
  })
}
