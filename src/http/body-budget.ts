import { AppError } from '../errors/index.js'

/**
 * Request-body bytes buffered at once by the whole process (one per app: the route parsers, the
 * idempotency middleware, which reads before any route, and /proxy charge it). Rate limits count requests at their
 * headers, so without it a few hundred callers each holding a 5 MB body open (sent all but its
 * last byte) held gigabytes for up to the request time-out. Bytes are charged as they arrive,
 * not as declared: a Content-Length costs the sender nothing, so reserving it would let a few
 * idle sockets shut every body out.
 */
export class BodyBudget {
  private used = 0

  constructor(private readonly limitBytes: number) {}

  get bytesInUse(): number {
    return this.used
  }

  /**
   * One body's account. A body whose declared length does not fit now is refused before any
   * of it is read; one that passes the budget later is refused when it does (see BodyCharge).
   */
  open(declaredBytes: number): BodyCharge {
    if (this.used + declaredBytes > this.limitBytes) throw this.busy()
    return new BodyCharge(this)
  }

  /** @internal BodyCharge's side. */
  tryTake(bytes: number): boolean {
    if (this.used + bytes > this.limitBytes) return false
    this.used += bytes
    return true
  }

  /** @internal BodyCharge's side. */
  give(bytes: number): void {
    this.used -= bytes
  }

  busy(): AppError {
    // Connection: close, or Node reads what is left of a refused body off a kept-alive socket.
    return new AppError('unavailable', {
      detail: `The service is receiving as many request bytes as it may hold at once (${this.limitBytes}); try again shortly.`,
      headers: { 'Retry-After': '1', Connection: 'close' },
    })
  }
}

/** What one body holds of a budget; `release` gives it all back, once, however the request ended. */
export class BodyCharge {
  private held = 0
  private released = false

  constructor(private readonly budget: BodyBudget) {}

  add(bytes: number): void {
    if (this.released) return
    if (!this.budget.tryTake(bytes)) {
      this.release()
      throw this.budget.busy()
    }
    this.held += bytes
  }

  release(): void {
    if (this.released) return
    this.released = true
    this.budget.give(this.held)
    this.held = 0
  }
}
