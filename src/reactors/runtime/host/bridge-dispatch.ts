/**
 * Runs in the API process: executes one bridge call a Reactor made (tokenize, detokenize,
 * fetch) against the HostBridges the supervisor was given. Arguments arrive as JSON written
 * inside the sandbox, so their shape is checked before any host code sees them.
 */
import { AppError } from '../../../errors/index.js'
import type { BridgeOp } from '../shared/protocol.js'

export interface BridgeFetchRequest {
  url: string
  method: string
  headers: Record<string, string>
  body?: string
}

export interface BridgeFetchResponse {
  status: number
  headers: Record<string, string>
  body: string
}

/** The services a Reactor may use; `ctx` is the opaque invocation context passed to `invoke`. */
export interface HostBridges {
  tokenize(ctx: unknown, value: unknown): Promise<unknown>
  detokenize(ctx: unknown, value: unknown): Promise<unknown>
  fetch(ctx: unknown, req: BridgeFetchRequest): Promise<BridgeFetchResponse>
}

/**
 * Resolves to the result as JSON text ('' for undefined); rejects with the host's error. An
 * answer over `maxBytes` is refused here: the worker takes frames up to the payload limit, and
 * a larger one (a fetched body of control characters, each escaped to six bytes; one large
 * token detokenized several times) killed the runtime and every tenant's calls in it.
 */
export async function dispatchBridge(bridges: HostBridges, op: BridgeOp, ctx: unknown, json: string, maxBytes: number): Promise<string> {
  let arg: unknown
  try {
    arg = JSON.parse(json)
  } catch {
    throw new AppError('bad_request', { detail: `The argument of ${op} is not valid JSON.` })
  }
  let value: unknown
  switch (op) {
    case 'tokenize':
      value = await bridges.tokenize(ctx, arg)
      break
    case 'detokenize':
      value = await bridges.detokenize(ctx, arg)
      break
    case 'fetch':
      value = toFetchResult(await bridges.fetch(ctx, toFetchRequest(arg)))
      break
  }
  const text = JSON.stringify(value) ?? ''
  if (text.length > maxBytes / 3 && Buffer.byteLength(text) > maxBytes) {
    throw new AppError('payload_too_large', { detail: `The answer of ${op} is larger than the ${maxBytes}-byte Reactor payload limit.` })
  }
  return text
}

/** What the Reactor sees of a failed call: an AppError's own words, anything else generic. */
export function bridgeErrorMessage(err: unknown): string {
  if (err instanceof AppError) return err.detail ?? err.title
  return 'The service call failed.'
}

function toFetchRequest(arg: unknown): BridgeFetchRequest {
  if (typeof arg !== 'object' || arg === null) throw fetchError('fetch needs a URL.')
  const { url, method, headers, body } = arg as Record<string, unknown>
  if (typeof url !== 'string' || url === '') throw fetchError('fetch needs a URL.')
  if (typeof method !== 'string' || !/^[A-Z]{1,16}$/.test(method)) throw fetchError('fetch method must be an HTTP method name.')
  if (body !== undefined && typeof body !== 'string') throw fetchError('fetch body must be a string.')
  const clean: Record<string, string> = {}
  if (typeof headers === 'object' && headers !== null) {
    for (const [name, value] of Object.entries(headers)) clean[name] = String(value)
  }
  return body === undefined ? { url, method, headers: clean } : { url, method, headers: clean, body }
}

function toFetchResult(res: BridgeFetchResponse): BridgeFetchResponse {
  return { status: res.status, headers: { ...res.headers }, body: res.body }
}

function fetchError(detail: string): AppError {
  return new AppError('bad_request', { detail })
}
