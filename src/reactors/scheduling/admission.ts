import { AppError } from '../../errors/index.js'

export interface AdmissionLimits {
  /**
   * Calls running at once: in all, per tenant, per Reactor; and per tenant, `perTenantSlow` of
   * its slow calls: those of Reactors not known to be quick (whose last call did not end within
   * `slowCallMs`, or that have not run yet) and those running longer than that.
   */
  concurrency: { total: number; perTenant: number; perReactor: number; perTenantSlow: number; slowCallMs: number }
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

/** A Reactor's running calls, and whether its last call ended within `slowCallMs`. */
interface ReactorState {
  running: number
  quick: boolean
}

/** A tenant's running calls: how many, how many started slow, and when the others started (oldest first). */
interface TenantState {
  running: number
  slow: number
  quickStarts: number[]
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
 * Slow start: a spinning call holds a core, not just a slot, and sixteen of them on two cores
 * leave everyone else a sliver of CPU. So a call of a Reactor that is not known to be quick (it
 * has not run yet, or its last call took longer than `slowCallMs`) starts only while the
 * tenant has fewer than `perTenantSlow` slow calls running (by default half the cores): calls
 * that started that way, and calls of quick Reactors that have run longer than `slowCallMs`.
 * Calls of quick Reactors have the tenant's full `perTenant`, so one spinning Reactor does not
 * hold back its tenant's quick ones. (A Reactor that is quick for one call and then spins gets
 * up to its caps for one deadline: wall time cannot tell in advance.)
 *
 * Invariant (kept by `pump` after every change): while fewer than `concurrency.total` calls run,
 * no waiting call could run. So a new call with room under its caps may start at once without
 * overtaking anyone who could have used that room. (Caps only widen when a call ends, and
 * every end pumps; time passing only narrows them.)
 */
export class Admission {
  private running = 0
  private queued = 0
  private shed = 0
  /** Tenants with calls running. */
  private readonly tenants = new Map<string, TenantState>()
  /** Reactors with calls running, or whose last call was quick; any other Reactor is slow. */
  private readonly reactors = new Map<string, ReactorState>()
  /** Per tenant, oldest first; Map order is the round-robin order (a served tenant moves to the end). */
  private readonly queues = new Map<string, Waiter[]>()

  constructor(
    private readonly limits: AdmissionLimits,
    private readonly retryAfterSeconds: number,
    private readonly timers: Timers = realTimers,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /**
   * Resolves with the call's Release once it may run. Rejects with 503 `reactor_overloaded`
   * when the queue is full, or when no slot freed within `maxWaitMs`.
   */
  admit(key: CallKey, maxWaitMs: number): Promise<Release> {
    if (this.running < this.limits.concurrency.total && this.fits(key, this.now())) return Promise.resolve(this.start(key))
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

  private fits(key: CallKey, now: number): boolean {
    const { perTenant, perReactor, perTenantSlow, slowCallMs } = this.limits.concurrency
    const reactor = this.reactors.get(key.reactorId)
    const tenant = this.tenants.get(key.tenantId)
    if ((reactor?.running ?? 0) >= perReactor || (tenant?.running ?? 0) >= perTenant) return false
    if (reactor?.quick === true) return true
    let slow = tenant?.slow ?? 0
    for (const startedAt of tenant?.quickStarts ?? []) {
      if (now - startedAt <= slowCallMs) break
      slow++
    }
    return slow < perTenantSlow
  }

  private start(key: CallKey): Release {
    const startedAt = this.now()
    let reactor = this.reactors.get(key.reactorId)
    if (reactor === undefined) this.reactors.set(key.reactorId, (reactor = { running: 0, quick: false }))
    let tenant = this.tenants.get(key.tenantId)
    if (tenant === undefined) this.tenants.set(key.tenantId, (tenant = { running: 0, slow: 0, quickStarts: [] }))
    const slow = !reactor.quick
    if (slow) tenant.slow++
    else tenant.quickStarts.push(startedAt)
    tenant.running++
    reactor.running++
    this.running++
    let released = false
    return () => {
      if (released) return
      released = true
      this.running--
      reactor.running--
      reactor.quick = this.now() - startedAt <= this.limits.concurrency.slowCallMs
      if (reactor.running === 0 && !reactor.quick) this.reactors.delete(key.reactorId)
      tenant.running--
      if (slow) tenant.slow--
      else tenant.quickStarts.splice(tenant.quickStarts.indexOf(startedAt), 1)
      if (tenant.running === 0) this.tenants.delete(key.tenantId)
      this.pump()
    }
  }

  /** Starts waiting calls while there is room: tenants round-robin, each tenant's oldest runnable call. */
  private pump(): void {
    const now = this.now()
    while (this.running < this.limits.concurrency.total) {
      const next = this.nextRunnable(now)
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

  private nextRunnable(now: number): Waiter | undefined {
    for (const queue of this.queues.values()) {
      for (const waiter of queue) if (this.fits(waiter.key, now)) return waiter
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
