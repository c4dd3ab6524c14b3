/**
 * Runs in the API process: what the bridge calls of one invocation may take of it. Every call
 * is served here (a `fetch` answer of up to the payload limit is read, decoded and encoded in
 * this process), so an invocation fanning out hundreds of them at once held gigabytes and stalled
 * every tenant's requests.
 */
import type { BridgeOp } from '../shared/protocol.js'

export interface BridgeLimits {
  /** Calls of one invocation served at once. */
  concurrency: number
  /** Bytes of answers (JSON text, UTF-8) one invocation receives in all. */
  answerMaxBytes: number
}

/** The most bytes an answer may have now, and the reason a larger one is refused with. */
export interface AnswerLimit {
  bytes: number
  detail: string
  /** The invocation's budget binds, not the payload limit. */
  budget: boolean
}

/**
 * One invocation's bridge calls. The runtime child posts at most `concurrency` of them at a time
 * (the prelude queues the rest inside the isolate, where their arguments count against its
 * memory limit), but the child runs tenant code and is not to be trusted: a call past the bound
 * is refused here, never queued, so this process holds at most `concurrency` calls of an
 * invocation whatever the child does. Their answers add up to at most `answerMaxBytes`. When the
 * invocation ends, calls still running are aborted (`signal`) and later ones refused.
 */
export class BridgeBudget {
  private inFlight = 0
  private received = 0
  private readonly ending = new AbortController()

  constructor(
    private readonly limits: BridgeLimits,
    private readonly payloadMaxBytes: number,
  ) {}

  /** Aborted once the invocation has ended. */
  get signal(): AbortSignal {
    return this.ending.signal
  }

  get ended(): boolean {
    return this.ending.signal.aborted
  }

  /** Takes a place for one call, or says why it gets none; `release()` gives it back. */
  admit(): string | undefined {
    if (this.ended) return 'The invocation has ended.'
    if (this.inFlight >= this.limits.concurrency) return `A Reactor may have at most ${this.limits.concurrency} service calls in flight at once.`
    if (this.received >= this.limits.answerMaxBytes) return this.spent()
    this.inFlight++
    return undefined
  }

  release(): void {
    this.inFlight--
  }

  /**
   * The bound on the next answer of `op`: the payload limit, or what is left of the budget when
   * that is less. Not for `tokenize`: its answer comes after its tokens were stored, and refusing
   * it would leave them stored with ids the code never gets (it is charged all the same, and
   * `admit` refuses the calls after it once the budget is spent).
   */
  answerLimit(op: BridgeOp): AnswerLimit {
    const left = this.limits.answerMaxBytes - this.received
    if (op !== 'tokenize' && left < this.payloadMaxBytes) return { bytes: Math.max(0, left), detail: this.spent(), budget: true }
    return { bytes: this.payloadMaxBytes, detail: `The answer of ${op} is larger than the ${this.payloadMaxBytes}-byte Reactor payload limit.`, budget: false }
  }

  /** An answer of `bytes` was read and encoded for the Reactor, whether or not it is let through. */
  charge(bytes: number): void {
    this.received += bytes
  }

  /** The invocation ended (answer, error, deadline, a dead isolate or runtime). */
  end(): void {
    this.ending.abort()
  }

  private spent(): string {
    return `The service calls of one Reactor invocation may receive at most ${this.limits.answerMaxBytes} bytes of answers in all.`
  }
}
