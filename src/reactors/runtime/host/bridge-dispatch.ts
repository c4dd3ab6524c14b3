/**
 * Runs in the API process: executes one bridge call a Reactor made (tokenize, detokenize,
 * fetch) against the HostBridges the supervisor was given. Arguments arrive as JSON written
 * inside the sandbox, so their shape is checked before any host code sees them.
 */
import { AppError } from '../../../errors/index.js'
import type { BridgeOp } from '../shared/protocol.js'
import type { BridgeBudget } from './bridge-budget.js'

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

/** What bounds one `fetch` beyond the payload limit. */
export interface BridgeFetchOptions {
  /** Aborted when the invocation ends: nothing more is sent or read for it. */
  signal?: AbortSignal
  /** Set when the invocation's answer budget leaves less than the payload limit: the body may have at most `bytes`, else it fails with `detail`. */
  budget?: { bytes: number; detail: string }
}

/** The services a Reactor may use; `ctx` is the opaque invocation context passed to `invoke`. */
export interface HostBridges {
  tokenize(ctx: unknown, value: unknown): Promise<unknown>
  detokenize(ctx: unknown, value: unknown): Promise<unknown>
  fetch(ctx: unknown, req: BridgeFetchRequest, options?: BridgeFetchOptions): Promise<BridgeFetchResponse>
}

/**
 * Resolves to the result as JSON text ('' for undefined); rejects with the host's error. An
 * answer over the payload limit is refused here: the worker takes frames up to that limit, and
 * a larger one (a fetched body of control characters, each escaped to six bytes; one large
 * token detokenized several times) killed the runtime and every tenant's calls in it. So is one
 * past what is left of the invocation's answer budget; an answer let through is charged to it.
 */
export async function dispatchBridge(bridges: HostBridges, op: BridgeOp, ctx: unknown, json: string, budget: Pick<BridgeBudget, 'signal' | 'answerLimit' | 'charge'>): Promise<string> {
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
    case 'fetch': {
      // The body is cut as soon as it passes the budget, not read whole first.
      const limit = budget.answerLimit(op)
      const options: BridgeFetchOptions = limit.budget ? { signal: budget.signal, budget: { bytes: limit.bytes, detail: limit.detail } } : { signal: budget.signal }
      try {
        value = toFetchResult(await bridges.fetch(ctx, toFetchRequest(arg), options))
      } catch (err) {
        // A body refused for its size was read up to the limit: that was spent all the same.
        if (err instanceof AppError && err.status === 413) budget.charge(limit.bytes)
        throw err
      }
      break
    }
  }
  const text = JSON.stringify(value) ?? ''
  // Checked and charged at once, with no await between: answers of calls running together
  // cannot each fit what is left and pass it together. A refused answer is charged too (it was
  // read and encoded here): otherwise refused answers could be made again and again.
  const limit = budget.answerLimit(op)
  const bytes = Buffer.byteLength(text)
  budget.charge(bytes)
  if (bytes > limit.bytes) throw new AppError('payload_too_large', { detail: limit.detail })
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
