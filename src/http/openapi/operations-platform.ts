import { Type } from '@sinclair/typebox'
import { PROXY_METHODS, PROXY_PREFIX } from '../routes/proxy.js'
import { Liveness, Readiness } from '../schemas/health.js'
import { op, type Method, type OperationDoc } from './operation.js'

const html = Type.String({ description: 'text/html' })

export const platformOperations = [
  op({ method: 'get', path: '/healthz', tag: 'Operations', summary: 'Liveness', auth: false, responses: { 200: { description: 'The process answers.', schema: Liveness } } }),
  op({ method: 'get', path: '/readyz', tag: 'Operations', summary: 'Readiness', description: 'Database, vault keys and rate-limit store.', auth: false, responses: { 200: { description: 'Ready (possibly degraded).', schema: Readiness }, 503: { description: 'A component is down.', schema: Readiness } } }),
  op({ method: 'get', path: '/openapi.json', tag: 'Operations', summary: 'This API description', auth: false, responses: { 200: { description: 'OpenAPI 3.1.', schema: Type.Object({}, { additionalProperties: true }) } } }),
  op({ method: 'get', path: '/docs', tag: 'Operations', summary: 'The API reference page', description: 'Rendered in the browser from /openapi.json, with assets served by Tessera itself.', auth: false, responses: { 200: { description: 'An HTML page.', schema: html } } }),
  op({ method: 'get', path: '/docs/{asset}', tag: 'Operations', summary: 'An asset of the reference page', auth: false, params: { asset: Type.String() }, responses: { 200: { description: 'A script or style sheet.', schema: Type.String() } } }),
  ...[PROXY_PREFIX, `${PROXY_PREFIX}/{path}`].flatMap((path) => PROXY_METHODS.map((method) => proxyOperation(method.toLowerCase() as Method, path))),
]

/** Only with `SVC_METRICS=operator` (`buildOpenApi({ metrics: true })`). */
export const metricsOperation = op({
  method: 'get',
  path: '/metrics',
  tag: 'Operations',
  summary: 'Prometheus metrics',
  description: 'The Prometheus text format (prom-client). `SVC-API-KEY` must hold the operator key (`SVC_OPERATOR_KEY`), not an Application key.',
  responses: { 200: { description: 'Metrics of this process.', contentType: 'text/plain', schema: Type.String() } },
})

function proxyOperation(method: Method, path: string): OperationDoc {
  const nested = path !== PROXY_PREFIX
  return op({
    method,
    path,
    tag: 'Proxy',
    summary: `${method.toUpperCase()} through the proxy${nested ? ' (with a path)' : ''}`,
    description: [
      'Forwards the request to `SVC-PROXY-URL` (or the pre-configured proxy named by `SVC-PROXY-KEY`)',
      nested ? 'with `{path}` (any depth) and the query appended,' : 'with the query appended,',
      'replacing `{{ <token id> }}` expressions in the body and headers with token data.',
      'The destination\'s answer comes back as it is, with SVC-PROXY-DESTINATION-STATUS.',
      'SVC-IDEMPOTENCY-KEY does not apply here.',
    ].join(' '),
    permission: 'token:use',
    params: nested ? { path: Type.String({ description: 'Any path, slashes included.' }) } : undefined,
    headers: {
      'SVC-PROXY-URL': { description: 'Destination base URL (ephemeral proxy).' },
      'SVC-PROXY-KEY': { description: 'Key of a pre-configured proxy.' },
      'SVC-PROXY-KEEP-ALIVE': { description: 'Sent as Keep-Alive to the destination.' },
      'SVC-PROXY-CONNECTION': { description: 'Sent as Connection to the destination.' },
    },
    body: method === 'get' || method === 'delete' ? undefined : Type.Unknown({ description: 'Any body for the destination.' }),
    bodyContentTypes: ['*/*'],
    proxyErrors: true,
    // 400: a refused destination, also where no path or body is read (GET /proxy).
    errors: [400, 404, 413, 502, 504],
    responses: {
      default: {
        description: 'The destination\'s answer, as it is.',
        schema: Type.Unknown(),
        headers: { 'SVC-PROXY-DESTINATION-STATUS': { description: 'The status the destination answered.', schema: Type.Integer() } },
      },
    },
  })
}
