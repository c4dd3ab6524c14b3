import type { StoredAnswer } from '../idempotency/service.js'

/**
 * How a route's answer is kept for replay under SVC-IDEMPOTENCY-KEY:
 * - `skip`: the header is ignored. Reads sent as POST (search, detokenize): a retry reads again,
 *   and their answers are plaintext by design, so none is stored.
 * - `withhold`: only the status is kept; a replay is 409 `idempotency-withheld`. Reactor answers
 *   are shaped by user code and may hold anything.
 * - `redact`: everything else; the answer is kept without credentials or token data.
 */
export type ReplayPolicy = 'skip' | 'withhold' | 'redact'

const POLICIES: [RegExp, ReplayPolicy][] = [
  [/^\/(v2\/)?tokens\/search\/*$/i, 'skip'],
  [/^\/detokenize\/*$/i, 'skip'],
  [/^\/reactors\/[^/]+\/react\/*$/i, 'withhold'],
]

export function replayPolicy(path: string): ReplayPolicy {
  return POLICIES.find(([pattern]) => pattern.test(path))?.[1] ?? 'redact'
}

/** A presented resource (it has `id` and `tenant_id`): its `key` and `data` are never kept. */
const RESOURCE_SECRETS = new Set(['key', 'data'])

/** A new session (it has `session_key`): its `nonce` authorizes it, so neither is kept. */
const SESSION_SECRETS = new Set(['session_key', 'nonce'])

/**
 * The replay form of a JSON answer: every presented resource loses `key` (Application and proxy
 * keys) and `data` (token data, whatever its transform), and a new session its `session_key` and
 * `nonce`. A replay of a create that returned a key answers the resource without it (regenerate
 * to get a new one); a replayed token has no `data` (read it with GET).
 */
export function redactForReplay(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(redactForReplay)
  if (value === null || typeof value !== 'object') return value
  const secrets = 'id' in value && 'tenant_id' in value ? RESOURCE_SECRETS : 'session_key' in value ? SESSION_SECRETS : undefined
  const out: Record<string, unknown> = {}
  for (const [name, field] of Object.entries(value)) {
    if (secrets?.has(name)) continue
    out[name] = redactForReplay(field)
  }
  return out
}

/**
 * What is stored of an answer; anything but JSON (or no body) is withheld. `jsonText`: a text
 * body is JSON (a scalar `answerJson` sent) and is stored as its value.
 */
export function storedAnswer(status: number, body: unknown, policy: ReplayPolicy, jsonText = false): StoredAnswer {
  if (body === undefined || body === null) return { status, body: null, withheld: false }
  const json = jsonValue(body, jsonText)
  if (policy === 'withhold' || !json) return { status, body: null, withheld: true }
  return { status, body: JSON.stringify(redactForReplay(json.value)), withheld: false }
}

function jsonValue(body: unknown, jsonText: boolean): { value: unknown } | undefined {
  if (typeof body === 'string') {
    if (!jsonText) return undefined
    try {
      return { value: JSON.parse(body) as unknown }
    } catch {
      return undefined
    }
  }
  if (typeof body !== 'object' || Buffer.isBuffer(body) || typeof (body as { pipe?: unknown }).pipe === 'function') return undefined
  return { value: body }
}
