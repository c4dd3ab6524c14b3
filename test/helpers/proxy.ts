import http from 'node:http'
import type { Test } from 'tap'
import { startTestApp, type StartOptions, type TestApp } from './app.js'
import { appKey } from './tokens.js'

interface TapLike {
  teardown(fn: () => unknown): void
}

export interface RawResponse {
  status: number
  headers: http.IncomingHttpHeaders
  rawHeaders: string[]
  body: Buffer
  /** The body parsed as JSON, when it is JSON. */
  json: any // eslint-disable-line @typescript-eslint/no-explicit-any -- tests inspect arbitrary JSON
}

export interface RawRequest {
  method?: string
  path?: string
  /** Flat `[name, value, ...]`, sent exactly as given (case, order, repeats). */
  headers?: string[]
  body?: string | Buffer
  /** Sent chunked, without Content-Length. */
  chunked?: boolean
}

export interface ProxyTestApp extends TestApp {
  /** Key of a private Application holding only token:use. */
  useKey: string
  /** A call to `/proxy...` with the use key and SVC-PROXY-URL set to `target`. */
  proxy(target: string, req?: RawRequest): Promise<RawResponse>
}

export async function startProxyApp(t: TapLike, env: Record<string, string> = {}, options: StartOptions = {}): Promise<ProxyTestApp> {
  const app = await startTestApp(t, env, options)
  const useKey = await appKey(app, { name: 'proxy caller', type: 'private', permissions: ['token:use'] })
  return {
    ...app,
    useKey,
    proxy: (target, req = {}) =>
      rawRequest(app.url, { ...req, path: req.path ?? '/proxy', headers: ['SVC-API-KEY', useKey, 'SVC-PROXY-URL', target, ...(req.headers ?? [])] }),
  }
}

/**
 * node:http rather than fetch: headers go out exactly as given (fetch refuses Connection and
 * Keep-Alive), and an aborted response rejects instead of looking like a short body.
 */
export function rawRequest(base: string, req: RawRequest): Promise<RawResponse> {
  const url = new URL(base)
  // With a header array node:http adds nothing, not even Host.
  const headers = ['Host', url.host, ...(req.headers ?? [])]
  if (req.body !== undefined && !req.chunked) headers.push('Content-Length', String(Buffer.byteLength(req.body)))
  return new Promise((resolve, reject) => {
    const outgoing = http.request({ host: url.hostname, port: url.port, method: req.method ?? 'GET', path: req.path ?? '/', headers, agent: false })
    outgoing.on('error', reject)
    outgoing.on('response', (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('error', reject)
      res.on('aborted', () => reject(new Error('response aborted')))
      res.on('end', () => {
        if (!res.complete) return reject(new Error('response incomplete'))
        const body = Buffer.concat(chunks)
        resolve({ status: res.statusCode ?? 0, headers: res.headers, rawHeaders: res.rawHeaders, body, json: parseJson(body) })
      })
    })
    if (req.chunked && req.body !== undefined) outgoing.write(req.body)
    outgoing.end(req.chunked ? undefined : req.body)
  })
}

function parseJson(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString('utf8'))
  } catch {
    return undefined
  }
}

/** `proxy_error` answers carry the problem inside and never the destination status. */
export function assertProxyError(t: Test, res: RawResponse, status: number, label = ''): void {
  t.equal(res.status, status, `${label} status ${status}`)
  t.notOk(res.headers['svc-proxy-destination-status'], `${label} no destination status`)
  t.match(res.json, { proxy_error: { status, title: String } }, `${label} proxy_error body`)
}
