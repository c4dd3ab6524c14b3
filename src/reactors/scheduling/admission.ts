import { AppError } from '../../errors/index.js'

export interface AdmissionLimits {
  /** Calls running at once: in all, per tenant, per Reactor. */
  concurrency: { total: number; perTenant: number; perReactor: number }
  /** Calls waiting for a slot: in all and per tenant. */
  queue: { total: number; perTenant: number }
}

/** Who a call belongs to. Reactor ids are unique across tenants (UUIDs, or a proxy id and the transform). */
export interface CallKey {
  tenantId: string
  reactorId: string
}

/** Ends the call's hold on its slots; idempotent. */
export type Release = () => void

export interface Timers {
  set(fn: () => void, ms: number): unknown
  clear(handle: unknown): void
}

const realTimers: Timers = {
  set: (fn, ms) => setTimeout(fn, ms),
  clear: (handle) => clearTimeout(handle as NodeJS.Timeout),
}

interface Waiter {
  key: CallKey
  admit(release: Release): void
  timer: unknown
}

export interface AdmissionStats {
  running: number
  queued: number
  shed: number
}

/**
 * Who may run now, in the API process, before anything reaches the runtime. Caps per Reactor,
 * per tenant and in all bound what one tenant can occupy (a `while(true){}` Reactor holds its
 * slots until its deadline, never anyone else's). A call over a cap waits in its tenant's queue,
 * bounded in length and in time; past either bound it is shed with 503 and Retry-After rather
 * than left to reach its deadline in a queue (a 504 that would say nothing about the Reactor).
 *
 * Fairness: when a slot frees, tenants with waiting calls are served round-robin, and within a
 * tenant the oldest call whose Reactor is under its cap goes first, so a Reactor at its cap
 * never holds back the tenant's other Reactors.
 *
 * Invariant (kept by `pump` after every change): while fewer than `concurrency.total` calls run,
 * no waiting call could run. So a new call with room under its caps may start at once without
 * overtaking anyone who could have used that room.
 */
export class Admission {
  private running = 0
  private queued = 0
  private shed = 0
  private readonly runningByTenant = new Map<string, number>()
  private readonly runningByReactor = new Map<string, number>()
  /** Per tenant, oldest first; Map order is the round-robin order (a served tenant moves to the end). */
  private readonly queues = new Map<string, Waiter[]>()

  constructor(
    private readonly limits: AdmissionLimits,
    private readonly retryAfterSeconds: number,
    private readonly timers: Timers = realTimers,
  ) {}

  /**
   * Resolves with the call's Release once it may run. Rejects with 503 `reactor_overloaded`
   * when the queue is full, or when no slot freed within `maxWaitMs`.
   */
  admit(key: CallKey, maxWaitMs: number): Promise<Release> {
    if (this.running < this.limits.concurrency.total && this.fits(key)) return Promise.resolve(this.start(key))
    const queue = this.queues.get(key.tenantId) ?? []
    if (maxWaitMs <= 0 || this.queued >= this.limits.queue.total || queue.length >= this.limits.queue.perTenant) {
      return Promise.reject(this.overloaded())
    }
    return new Promise<Release>((resolve, reject) => {
      const waiter: Waiter = {
        key,
        admit: resolve,
        timer: this.timers.set(() => {
          if (!this.remove(waiter)) return
          reject(this.overloaded())
        }, maxWaitMs),
      }
      queue.push(waiter)
      this.queues.set(key.tenantId, queue)
      this.queued++
    })
  }

  stats(): AdmissionStats {
    return { running: this.running, queued: this.queued, shed: this.shed }
  }

  private fits(key: CallKey): boolean {
    const { perTenant, perReactor } = this.limits.concurrency
    return (this.runningByTenant.get(key.tenantId) ?? 0) < perTenant && (this.runningByReactor.get(key.reactorId) ?? 0) < perReactor
  }

  private start(key: CallKey): Release {
    this.running++
    bump(this.runningByTenant, key.tenantId, 1)
    bump(this.runningByReactor, key.reactorId, 1)
    let released = false
    return () => {
      if (released) return
      released = true
      this.running--
      bump(this.runningByTenant, key.tenantId, -1)
      bump(this.runningByReactor, key.reactorId, -1)
      this.pump()
    }
  }

  /** Starts waiting calls while there is room: tenants round-robin, each tenant's oldest runnable call. */
  private pump(): void {
    while (this.running < this.limits.concurrency.total) {
      const next = this.nextRunnable()
      if (next === undefined) return
      this.remove(next)
      // Served: this tenant goes to the back of the round.
      const queue = this.queues.get(next.key.tenantId)
      if (queue !== undefined) {
        this.queues.delete(next.key.tenantId)
        this.queues.set(next.key.tenantId, queue)
      }
      next.admit(this.start(next.key))
    }
  }

  private nextRunnable(): Waiter | undefined {
    for (const queue of this.queues.values()) {
      for (const waiter of queue) if (this.fits(waiter.key)) return waiter
    }
    return undefined
  }

  private remove(waiter: Waiter): boolean {
    const queue = this.queues.get(waiter.key.tenantId)
    const index = queue?.indexOf(waiter) ?? -1
    if (queue === undefined || index < 0) return false
    queue.splice(index, 1)
    if (queue.length === 0) this.queues.delete(waiter.key.tenantId)
    this.queued--
    this.timers.clear(waiter.timer)
    return true
  }

  private overloaded(): AppError {
    this.shed++
    const retryAfter = String(this.retryAfterSeconds)
    return new AppError('reactor_overloaded', {
      detail: `The Reactor runtime is at capacity for this Reactor or tenant; retry after ${retryAfter} s.`,
      headers: { 'Retry-After': retryAfter },
    })
  }
}

function bump(counts: Map<string, number>, key: string, by: number): void {
  const value = (counts.get(key) ?? 0) + by
  if (value <= 0) counts.delete(key)
  else counts.set(key, value)
}
