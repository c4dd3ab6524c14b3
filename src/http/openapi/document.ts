import type { TSchema } from '@sinclair/typebox'
import { errorCodes } from '../../errors/index.js'
import { packageVersion } from '../../version.js'
import { replayPolicy } from '../idempotency-replay.js'
import { IDEMPOTENCY_HEADER } from '../middleware/idempotency.js'
import { ApplicationResponse } from '../schemas/applications.js'
import { AccessRule } from '../schemas/common.js'
import { Problem, ProxyError } from '../schemas/problem.js'
import { ProxyResponse } from '../schemas/proxies.js'
import { ReactorResponse } from '../schemas/reactors.js'
import { TenantResponse } from '../schemas/tenants.js'
import { TokenResponse } from '../schemas/tokens.js'
import { applicationOperations } from './operations-applications.js'
import { logsOperations } from './operations-logs.js'
import { codeOperations } from './operations-code.js'
import { metricsOperation, platformOperations } from './operations-platform.js'
import { tokenOperations } from './operations-tokens.js'
import type { OperationDoc, ResponseDoc } from './operation.js'

export const operations: readonly OperationDoc[] = [...applicationOperations, ...tokenOperations, ...codeOperations, ...logsOperations, ...platformOperations]

/** Schemas shown once under components and referenced wherever they occur. */
const NAMED = new Map<TSchema, string>([
  [Problem, 'Problem'],
  [ProxyError, 'ProxyError'],
  [AccessRule, 'AccessRule'],
  [ApplicationResponse, 'Application'],
  [TokenResponse, 'Token'],
  [ReactorResponse, 'Reactor'],
  [ProxyResponse, 'Proxy'],
  [TenantResponse, 'Tenant'],
])

type Json = Record<string, unknown>

/** A TypeBox schema as plain JSON Schema 2020-12, with named sub-schemas as `$ref`s. */
function schemaJson(schema: TSchema, root = true): unknown {
  const name = NAMED.get(schema)
  if (name && !root) return { $ref: `#/components/schemas/${name}` }
  const walk = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(walk)
    if (node === null || typeof node !== 'object') return node
    if (NAMED.has(node as TSchema)) return schemaJson(node as TSchema, false)
    // Object.entries skips TypeBox's symbol keys, so only JSON Schema remains.
    return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, walk(v)]))
  }
  return Object.fromEntries(Object.entries(schema).map(([k, v]) => [k, walk(v)]))
}

const RATE_HEADERS = {
  'RateLimit-Limit': { $ref: '#/components/headers/RateLimit-Limit' },
  'RateLimit-Remaining': { $ref: '#/components/headers/RateLimit-Remaining' },
  'RateLimit-Reset': { $ref: '#/components/headers/RateLimit-Reset' },
  'SVC-Trace-Id': { $ref: '#/components/headers/SVC-Trace-Id' },
}

const usesIdempotency = (o: OperationDoc) => o.auth !== false && !o.proxyErrors && ['post', 'put', 'patch'].includes(o.method) && replayPolicy(o.path) !== 'skip'

/** Failure statuses an operation can answer, derived from what it takes and guards. */
function errorStatuses(o: OperationDoc): number[] {
  const out = new Set<number>([429, 500, 503, ...(o.errors ?? [])])
  if (o.auth !== false || o.path === '/tenants') out.add(401)
  if (o.permission || o.auth !== false) out.add(403)
  if (o.params || o.query || o.body) out.add(400)
  if (o.params) out.add(404)
  if (o.body) out.add(413).add(415)
  // A malformed SVC-IDEMPOTENCY-KEY is a 400 even where nothing else is read.
  if (usesIdempotency(o)) out.add(400).add(409).add(422)
  return [...out].sort()
}

/** Every failure answer is one shared response per status (and per body form: problem or proxy_error). */
const problemRef = (status: number, proxy: boolean) => ({ $ref: `#/components/responses/${proxy ? 'ProxyError' : 'Problem'}${status}` })

function problemResponses(): Json {
  const out: Json = {}
  const statuses = [...new Set(Object.values(errorCodes).map((e) => e.status))]
  for (const proxy of [false, true]) {
    for (const status of statuses) {
      const titles = Object.values(errorCodes).filter((e) => e.status === status).map((e) => e.title)
      const headers = status === 429 || status === 503 ? { ...RATE_HEADERS, 'Retry-After': { $ref: '#/components/headers/Retry-After' } } : RATE_HEADERS
      out[`${proxy ? 'ProxyError' : 'Problem'}${status}`] = {
        description: titles.join(' / '),
        headers,
        content: { 'application/problem+json': { schema: { $ref: `#/components/schemas/${proxy ? 'ProxyError' : 'Problem'}` } } },
      }
    }
  }
  return out
}

function successResponse(r: ResponseDoc): Json {
  const headers: Json = { ...RATE_HEADERS }
  for (const [name, h] of Object.entries(r.headers ?? {})) headers[name] = { description: h.description, schema: schemaJson(h.schema) }
  const out: Json = { description: r.description, headers }
  if (r.schema) out.content = { [r.contentType ?? (r.schema.description === 'text/html' ? 'text/html' : 'application/json')]: { schema: schemaJson(r.schema) } }
  return out
}

function parameters(o: OperationDoc): Json[] {
  const out: Json[] = []
  for (const [name, schema] of Object.entries(o.params ?? {})) out.push({ name, in: 'path', required: true, schema: schemaJson(schema) })
  const required = new Set(o.query?.required ?? [])
  for (const [name, schema] of Object.entries(o.query?.properties ?? {})) {
    const s = schemaJson(schema) as Json
    const param: Json = { name, in: 'query', required: required.has(name) && !('default' in s), schema: s }
    if (s.type === 'array') Object.assign(param, { style: 'form', explode: true })
    out.push(param)
  }
  for (const [name, h] of Object.entries(o.headers ?? {})) out.push({ name, in: 'header', required: h.required ?? false, description: h.description, schema: { type: 'string' } })
  if (usesIdempotency(o)) out.push({ $ref: '#/components/parameters/IdempotencyKey' })
  return out
}

function operation(o: OperationDoc): Json {
  const responses: Json = {}
  for (const [status, r] of Object.entries(o.responses)) if (r) responses[status] = successResponse(r)
  for (const status of errorStatuses(o)) responses[String(status)] ??= problemRef(status, o.proxyErrors ?? false)
  const out: Json = {
    operationId: `${o.method}${o.path.replace(/[{}]/g, '').replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ? c.toUpperCase() : ''))}`,
    tags: [o.tag],
    summary: o.summary,
    description: [o.description, o.permission ? `Permission: \`${o.permission}\`.` : undefined].filter(Boolean).join('\n\n') || undefined,
    parameters: parameters(o),
    responses,
  }
  if (o.auth === false || o.path === '/tenants') out.security = []
  if (o.body) {
    const types = o.bodyContentTypes ?? ['application/json']
    out.requestBody = { required: o.bodyRequired ?? !o.proxyErrors, content: Object.fromEntries(types.map((t) => [t, { schema: schemaJson(o.body!) }])) }
  }
  return out
}

/** Routes that exist only in some configurations. */
export interface ApiSurface {
  /** `SVC_METRICS=operator`: `GET /metrics` on the API port. */
  metrics: boolean
}

/** The OpenAPI 3.1 description of every route the app serves, built from the operations' schemas. */
export function buildOpenApi(surface: ApiSurface = { metrics: false }): Json {
  const served = surface.metrics ? [...operations, metricsOperation] : operations
  const paths: Record<string, Json> = {}
  for (const o of served) (paths[o.path] ??= {})[o.method] = operation(o)
  return {
    openapi: '3.1.0',
    info: {
      title: 'Tessera',
      version: packageVersion(),
      description: 'Self-hostable tokenization service: vault, detokenizing proxy, sandboxed Reactors. Errors are RFC 9457 problem details (see the Problem schema for every type).',
      license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
    },
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    security: [{ ApiKey: [] }],
    tags: [...new Set(served.map((o) => o.tag))].map((name) => ({ name })),
    paths,
    components: {
      securitySchemes: { ApiKey: { type: 'apiKey', in: 'header', name: 'SVC-API-KEY' } },
      schemas: Object.fromEntries([...NAMED].map(([schema, name]) => [name, schemaJson(schema)])),
      responses: problemResponses(),
      parameters: {
        IdempotencyKey: {
          name: IDEMPOTENCY_HEADER,
          in: 'header',
          required: false,
          description: 'Replays the first answer of this key for 24 h (without keys or token data); 409 while it runs, 422 for another request.',
          schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x21-\\x7e]+$' },
        },
      },
      headers: {
        'RateLimit-Limit': { description: 'Requests allowed in the tightest scope\'s window.', schema: { type: 'integer' } },
        'RateLimit-Remaining': { description: 'Requests left in it.', schema: { type: 'integer' } },
        'RateLimit-Reset': { description: 'Seconds until it resets.', schema: { type: 'integer' } },
        'Retry-After': { description: 'Seconds to wait.', schema: { type: 'integer' } },
        'SVC-Trace-Id': { description: 'The request id.', schema: { type: 'string' } },
      },
    },
  }
}
