import { createHmac, createSecretKey, hkdfSync, randomUUID } from 'node:crypto'
import { AppError } from '../errors/index.js'
import type { Store } from '../store/index.js'

/** What a stored answer holds: status and its replay form (null: no body). */
export interface StoredAnswer {
  status: number
  body: string | null
  /** The answer could hold plaintext and was not kept: a replay is refused (409). */
  withheld: boolean
}

export type IdempotencyStart =
  | { kind: 'run'; complete(answer: StoredAnswer): Promise<void>; release(): Promise<void> }
  | { kind: 'replay'; status: number; body: unknown }

export interface IdempotencyOptions {
  /** How long an answer is replayed. */
  ttlSeconds: number
  /** How long a claim holds unless renewed (a third of it apart while its request runs); after that a retry may take it over. */
  leaseSeconds: number
  /** SVC_KEY_HASH_SECRET: request fingerprints are keyed with a key derived from it. */
  secret: string
}

/**
 * `SVC-IDEMPOTENCY-KEY`, per tenant and key: the first request claims the key and runs; a
 * repeat of it is answered from what the first stored; anything else with the key is refused.
 * No wait anywhere: a repeat while the first still runs gets 409 at once.
 */
export function idempotencyService(store: Store, options: IdempotencyOptions) {
  const repo = store.idempotency
  const fingerprintKey = createSecretKey(Buffer.from(hkdfSync('sha256', options.secret, Buffer.alloc(0), 'tessera/idempotency/v1', 32)))

  /**
   * What a repeat must match: the caller, the request line and the body, as a keyed hash. An
   * unkeyed hash let anyone reading the table find a body's card number by guessing (the rest of
   * the input is known, and a PAN with a known BIN and last 4 digits has about 10^5 candidates).
   */
  function fingerprint(principalId: string, method: string, path: string, query: string, body: Buffer): string {
    return createHmac('sha256', fingerprintKey).update(JSON.stringify([principalId, method, path, query])).update(body).digest('hex')
  }

  async function begin(tenantId: string, key: string, fingerprint: string): Promise<IdempotencyStart> {
    // Two rounds: the row seen by a failed claim can expire or be released before we read it.
    for (let round = 0; round < 2; round++) {
      const owner = randomUUID()
      if (await repo.claim({ tenantId, key, fingerprint, owner, leaseSeconds: options.leaseSeconds, ttlSeconds: options.ttlSeconds })) {
        // The claim is renewed while its request runs, however long (a database that answers
        // slowly, a long Reactor call): its lease ends only when its process stopped renewing it.
        const renewal = setInterval(() => void repo.renew(tenantId, key, owner, options.leaseSeconds).catch(() => undefined), (options.leaseSeconds * 1000) / 3)
        renewal.unref()
        return {
          kind: 'run',
          complete: (answer) => (clearInterval(renewal), repo.complete(tenantId, key, owner, answer)),
          release: () => (clearInterval(renewal), repo.release(tenantId, key, owner)),
        }
      }
      const found = await repo.find(tenantId, key)
      if (!found) continue
      if (found.fingerprint !== fingerprint) throw new AppError('idempotency_mismatch')
      if (found.status === null) throw new AppError('idempotency_in_flight', { headers: { 'Retry-After': '1' } })
      if (found.withheld) {
        throw new AppError('idempotency_withheld', { detail: `The request already ran and answered with status ${found.status}; that answer was not kept.` })
      }
      return { kind: 'replay', status: found.status, body: found.body === null ? undefined : JSON.parse(found.body) }
    }
    throw new AppError('idempotency_in_flight', { headers: { 'Retry-After': '1' } })
  }

  return {
    fingerprint,
    begin,
    pruneExpired: () => repo.deleteExpired(),
  }
}

export type IdempotencyService = ReturnType<typeof idempotencyService>
