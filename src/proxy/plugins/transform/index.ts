import type { Readable } from 'node:stream'
import type { JSONSchemaType } from 'ajv'
import { actingApplication } from '../../../auth/policies.js'
import { AppError } from '../../../errors/index.js'
import type { CodeRunner, HostedCode, ReactorOutcome } from '../../../reactors/code-host.js'
import type { ForwardBody } from '../../../egress/forward.js'
import { toForwardError } from '../../../egress/forward-errors.js'
import { contentCoding, findHeader, flatValue, prepareRequestHeaders, withHeader, type ResponseHeaders } from '../../../egress/headers.js'
import { readBounded } from '../../../egress/body.js'
import { isRecord } from '../../../shapes/http-parts.js'
import type { Exchange, ProxyPlugin, Respond } from '../../pipeline/index.js'
import {
  bodyArg,
  encodeBody,
  malformed,
  requestHeaderArg,
  responseHeaderArg,
  returnedHeaders,
  returnedStatus,
  type TransformKind,
} from './shapes.js'

/**
 * One transform of one pre-configured proxy, as the code host runs it: `tenantId` is the proxy's
 * (transforms count against its Reactor concurrency caps), `reactorId` is stable per proxy and
 * transform, `version` changes with the code. Its length was checked by the code host on save.
 */
export type TransformConfig = HostedCode

export interface TransformLimits {
  /** Largest destination body read for a response transform (the Reactor payload limit). */
  payloadMaxBytes: number
}

const configSchema: JSONSchemaType<TransformConfig> = {
  type: 'object',
  properties: {
    tenantId: { type: 'string', minLength: 1 },
    reactorId: { type: 'string', minLength: 1 },
    version: { type: 'string', minLength: 1 },
    code: { type: 'string', minLength: 1 },
    configuration: { type: 'object', required: [], additionalProperties: { type: 'string' } },
  },
  required: ['tenantId', 'reactorId', 'version', 'code', 'configuration'],
  additionalProperties: false,
}

/**
 * Reactor code run on the request before it is forwarded: `args = {body, headers, method, path,
 * query}` -> `{body, headers}` (a field left out keeps its value). Priority 600, before
 * detokenization (500): the code sees the caller's expressions, not the plaintext behind them,
 * and expressions it writes are detokenized under the same rules as the caller's.
 */
export function requestTransformPlugin(runner: CodeRunner): ProxyPlugin<TransformConfig> {
  return {
    ...transformPlugin('request'),
    async beforeForward(exchange, config) {
      const { incoming, outgoing } = exchange
      if (incoming.body.length > 0 && contentCoding(flatValue(outgoing.headers, 'content-encoding')) !== undefined) {
        throw new AppError('unsupported_media_type', { detail: 'A request transform cannot read a body with a Content-Encoding: send it uncompressed.' })
      }
      const forwarded = prepareRequestHeaders(outgoing.headers).list
      const args = {
        body: bodyArg(bufferOf(outgoing.body), findHeader(outgoing.headers, 'content-type')),
        headers: requestHeaderArg(forwarded),
        method: incoming.method,
        path: incoming.path,
        query: incoming.query,
      }
      const result = await run(runner, 'request', config, args, exchange, '{body, headers}')
      if ('respond' in result) return result.respond
      // Detokenization comes next, as the proxy's Application where it acts as one: as that
      // Application is now, not as it was before the code ran (deleted: nothing is forwarded).
      const { actor } = exchange
      if (actor !== undefined && exchange.principal === actor && runner.actor) exchange.principal = actingApplication(await runner.actor(actor.tenantId, actor.id), 'proxy')
      const { value } = result
      let headers = value.headers === undefined ? undefined : returnedHeaders('request', value.headers).flat()
      if (value.body !== undefined) {
        const { bytes, json } = encodeBody(value.body)
        outgoing.body = bytes
        const current = headers ?? outgoing.headers
        if (json && findHeader(current, 'content-type') === undefined) headers = [...current, 'content-type', 'application/json']
      }
      if (headers !== undefined) outgoing.headers = headers
    },
  }
}

/**
 * Reactor code run on a 2xx answer of the destination before the caller gets it: `args = {body,
 * headers, status}` -> `{body, headers, status}` (a field left out keeps its value). The body is
 * read whole, up to the Reactor payload limit; other answers stream through untouched.
 */
export function responseTransformPlugin(runner: CodeRunner, limits: TransformLimits): ProxyPlugin<TransformConfig> {
  return {
    ...transformPlugin('response'),
    // The code reads the answer as text or JSON: the destination is asked not to compress it.
    beforeForward(exchange) {
      exchange.outgoing.headers = withHeader(exchange.outgoing.headers, 'accept-encoding', 'identity')
      return Promise.resolve()
    },
    async afterForward(exchange, config) {
      const response = exchange.response
      if (response === undefined || response.status < 200 || response.status > 299) return
      if (contentCoding(response.headers['content-encoding']) !== undefined) {
        throw new AppError('destination_unreachable', { detail: 'The destination compressed its answer although asked not to: the response transform cannot read it.' })
      }
      const raw = await readLimited(response.body, limits.payloadMaxBytes)
      const contentType = response.headers['content-type']
      const headerArg = responseHeaderArg(response.headers)
      const args = { body: bodyArg(raw, Array.isArray(contentType) ? contentType[0] : contentType), headers: headerArg, status: response.status }
      const result = await run(runner, 'response', config, args, exchange, '{body, headers, status}')
      if ('respond' in result) return result.respond
      const { value } = result
      const status = value.status === undefined ? response.status : returnedStatus(value.status)
      const pairs = destinationCaching(returnedHeaders('response', value.headers === undefined ? headerArg : value.headers), response.headers)
      const { bytes, json } = value.body === undefined ? { bytes: raw, json: false } : encodeBody(value.body)
      return answer(status, pairs, bytes, json)
    },
  }
}

/** Both transforms run at priority 600, between the caller's expressions and their plaintext. */
function transformPlugin(which: TransformKind): Pick<ProxyPlugin<TransformConfig>, 'name' | 'priority' | 'configSchema'> {
  return { name: `${which}-transform`, priority: 600, configSchema }
}

/**
 * Runs the transform. A CustomHttpResponseError it throws answers the caller at once
 * (`respond`); otherwise its value must be an object of the fields named in `shape`.
 */
async function run(runner: CodeRunner, which: TransformKind, config: TransformConfig, args: unknown, exchange: Exchange, shape: string): Promise<{ respond: Respond } | { value: Record<string, unknown> }> {
  const outcome = await invoke(runner, which, config, args, exchange)
  if (outcome.kind === 'response') return { respond: respondWith(outcome) }
  if (!isRecord(outcome.value)) throw malformed(which, `it must be an object ${shape}.`)
  return { value: outcome.value }
}

async function invoke(runner: CodeRunner, which: TransformKind, config: TransformConfig, args: unknown, exchange: Exchange): Promise<ReactorOutcome> {
  try {
    return await runner.invoke(config, args, { actor: exchange.actor, tokenRead: exchange.audit?.tokenRead, tokensCreated: exchange.audit?.tokensCreated, denied: exchange.audit?.denied, fetching: exchange.audit?.fetching })
  } catch (err) {
    if (!(err instanceof AppError)) throw err
    // Headers (Retry-After of a shed call) and whether tenant code wrote the detail stay with the error.
    throw new AppError(err.code, { detail: `The ${which} transform failed: ${err.detail ?? err.title}`, errors: err.errors, headers: err.headers, cause: err, untrustedDetail: err.untrustedDetail })
  }
}

/** A CustomHttpResponseError thrown by the transform: the caller gets exactly that answer. */
function respondWith(outcome: Extract<ReactorOutcome, { kind: 'response' }>): Respond {
  const { bytes, json } = encodeBody(outcome.body ?? null)
  return answer(outcome.status, destinationCaching(returnedHeaders('response', outcome.headers), {}), bytes, json)
}

function answer(status: number, pairs: [string, string][], body: Buffer, json: boolean): Respond {
  const headers: ResponseHeaders = {}
  for (const [rawName, value] of pairs) {
    const name = rawName.toLowerCase()
    const current = headers[name]
    headers[name] = current === undefined ? value : Array.isArray(current) ? [...current, value] : [current, value]
  }
  if (json && headers['content-type'] === undefined) headers['content-type'] = 'application/json'
  headers['content-length'] = String(body.length)
  return { status, headers, body }
}

/** The request body as the pipeline holds it; a transform runs first, so it is still the bytes received. */
function bufferOf(body: ForwardBody): Buffer {
  if (body === null) return Buffer.alloc(0)
  if (typeof body === 'string') return Buffer.from(body, 'utf8')
  if (body instanceof Uint8Array) return Buffer.from(body.buffer, body.byteOffset, body.byteLength)
  throw new AppError('internal', { detail: 'A streamed body cannot be transformed.' })
}

/** The answer, whole; one over the limit is the destination's fault (502), not the caller's payload (413). */
async function readLimited(body: Readable, limit: number): Promise<Buffer> {
  try {
    return await readBounded(body, limit, `The destination's answer is larger than the ${limit}-byte transform limit.`, 'destination_unreachable')
  } catch (err) {
    throw toForwardError(err)
  }
}

/**
 * A transform's answer keeps the destination's `Cache-Control`, never one of its own: without
 * one from the destination the answer stays `no-store` (the route's default), so code cannot make
 * an answer it built from revealed data cacheable.
 */
function destinationCaching(pairs: [string, string][], destination: ResponseHeaders): [string, string][] {
  const own = pairs.filter(([name]) => name.toLowerCase() !== 'cache-control')
  const sent = destination['cache-control']
  if (sent === undefined) return own
  for (const value of Array.isArray(sent) ? sent : [sent]) own.push(['cache-control', value])
  return own
}
