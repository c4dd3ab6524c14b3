export interface WarmLimits {
  /** Warm isolates a Reactor keeps for good (SPEC 8.2 "hot concurrency"); 0 keeps none at all. */
  hotConcurrency: number
  /** Most warm isolates per Reactor, hot ones included. */
  perReactor: number
  /** Most warm isolates in all; past it the least recently used idle one makes room. */
  total: number
  /** How long an isolate beyond hot concurrency stays warm unused; 0: extras are not kept. */
  idleMs: number
}

/** One isolate of one Reactor version in one lane (worker thread) of the runtime. */
export interface Slot {
  readonly id: number
  readonly lane: number
  readonly reactorId: string
  readonly version: string
  busy: boolean
  /** The worker keeps it after the call (warm); otherwise it is disposed after the call (cold extra). */
  kept: boolean
  /** Its Reactor version was replaced or deleted: dropped as soon as its call ends. */
  retired: boolean
  lastUsedAt: number
}

export interface Checkout {
  slot: Slot
  /** A new isolate: the worker creates it (a cold start) and needs the code. */
  fresh: boolean
  /** Idle isolates to dispose now (an old version, or evicted to make room). */
  drops: Slot[]
}

interface Entry {
  version: string
  slots: Slot[]
}

/**
 * The API process's ledger of the runtime's isolates, one per runtime process: it decides which
 * isolate serves a call, on which lane a cold one starts, and which isolates stay warm. Workers
 * keep or dispose isolates only as told (or when an isolate dies or outgrows its heap, which
 * they report with the call's answer), so this ledger is exact and the bounds hold.
 *
 * Scale-out the way serverless platforms do it: a call finding no idle warm isolate starts a
 * cold one, which stays warm (up to `perReactor`) and goes back after `idleMs` unused, down to
 * `hotConcurrency`. The most recently used idle isolate serves first, so extras fall idle and
 * age out when the load drops. A Reactor's isolates spread over the lanes (each cold start goes
 * to the least busy one), so one Reactor uses every worker thread.
 */
export class WarmPool {
  private readonly entries = new Map<string, Entry>()
  private readonly laneRunning: number[]
  private readonly laneWarm: number[]
  private warm = 0
  private nextId = 0

  constructor(
    private readonly limits: WarmLimits,
    lanes: number,
    private readonly now: () => number,
  ) {
    this.laneRunning = new Array<number>(lanes).fill(0)
    this.laneWarm = new Array<number>(lanes).fill(0)
  }

  checkout(reactorId: string, version: string): Checkout {
    const drops: Slot[] = []
    let entry = this.entries.get(reactorId)
    if (entry !== undefined && entry.version !== version) {
      drops.push(...this.retire(reactorId))
      entry = undefined
    }
    if (entry === undefined) {
      entry = { version, slots: [] }
      this.entries.set(reactorId, entry)
    }
    const idle = mostRecentIdle(entry.slots)
    if (idle !== undefined) {
      idle.busy = true
      this.laneRunning[idle.lane]!++
      return { slot: idle, fresh: false, drops }
    }
    const kept = this.mayKeep(entry, drops)
    const lane = this.leastBusyLane()
    const slot: Slot = { id: ++this.nextId, lane, reactorId, version, busy: true, kept, retired: false, lastUsedAt: this.now() }
    entry.slots.push(slot)
    this.laneRunning[lane]!++
    if (kept) this.countWarm(slot, 1)
    return { slot, fresh: true, drops }
  }

  /**
   * The call on `slot` ended; `survived` is false when the worker disposed the isolate (not kept,
   * timed out, out of memory, recycled). Returns the slot when it must be dropped now (retired).
   */
  checkin(slot: Slot, survived: boolean): Slot | undefined {
    slot.busy = false
    slot.lastUsedAt = this.now()
    this.laneRunning[slot.lane]!--
    const alive = slot.kept && survived
    if (alive && !slot.retired) return undefined
    this.forget(slot)
    return alive ? slot : undefined
  }

  /** A deleted Reactor or a replaced version: idle isolates go now (returned), busy ones after their call. */
  retire(reactorId: string): Slot[] {
    const entry = this.entries.get(reactorId)
    if (entry === undefined) return []
    const drops: Slot[] = []
    for (const slot of [...entry.slots]) {
      slot.retired = true
      if (slot.busy) continue
      this.forget(slot)
      drops.push(slot)
    }
    this.entries.delete(reactorId)
    return drops
  }

  /** Isolates beyond hot concurrency idle for `idleMs` or longer: to drop now (returned). */
  sweep(): Slot[] {
    const cutoff = this.now() - this.limits.idleMs
    const drops: Slot[] = []
    for (const entry of [...this.entries.values()]) {
      const kept = entry.slots.filter((s) => s.kept)
      let excess = kept.length - this.limits.hotConcurrency
      for (const slot of kept.filter((s) => !s.busy).sort((a, b) => a.lastUsedAt - b.lastUsedAt)) {
        if (excess <= 0 || slot.lastUsedAt > cutoff) break
        this.forget(slot)
        drops.push(slot)
        excess--
      }
    }
    return drops
  }

  stats(): { warm: number; reactors: number } {
    return { warm: this.warm, reactors: this.entries.size }
  }

  /** Whether a new isolate of `entry` may stay warm; may evict another Reactor's idle isolate (into `drops`). */
  private mayKeep(entry: Entry, drops: Slot[]): boolean {
    const { hotConcurrency, perReactor, total, idleMs } = this.limits
    if (hotConcurrency === 0) return false
    const cap = idleMs > 0 ? Math.max(hotConcurrency, perReactor) : hotConcurrency
    if (entry.slots.filter((s) => s.kept).length >= cap) return false
    if (this.warm < total) return true
    const victim = this.leastRecentIdle()
    if (victim === undefined) return false
    this.forget(victim)
    drops.push(victim)
    return true
  }

  private leastRecentIdle(): Slot | undefined {
    let best: Slot | undefined
    for (const entry of this.entries.values()) {
      for (const s of entry.slots) if (s.kept && !s.busy && (best === undefined || s.lastUsedAt < best.lastUsedAt)) best = s
    }
    return best
  }

  /** Fewest running calls; on a tie, fewest warm isolates. */
  private leastBusyLane(): number {
    let best = 0
    for (let lane = 1; lane < this.laneRunning.length; lane++) {
      const [r, w] = [this.laneRunning[lane]!, this.laneWarm[lane]!]
      const [br, bw] = [this.laneRunning[best]!, this.laneWarm[best]!]
      if (r < br || (r === br && w < bw)) best = lane
    }
    return best
  }

  /** Takes the slot out of the ledger (and out of the warm count if it was kept). */
  private forget(slot: Slot): void {
    const entry = this.entries.get(slot.reactorId)
    const index = entry?.slots.indexOf(slot) ?? -1
    if (entry !== undefined && index >= 0) {
      entry.slots.splice(index, 1)
      if (entry.slots.length === 0) this.entries.delete(slot.reactorId)
    }
    if (slot.kept) {
      slot.kept = false
      this.countWarm(slot, -1)
    }
  }

  private countWarm(slot: Slot, by: number): void {
    this.warm += by
    this.laneWarm[slot.lane]! += by
  }
}

function mostRecentIdle(slots: Slot[]): Slot | undefined {
  let best: Slot | undefined
  for (const s of slots) if (s.kept && !s.busy && (best === undefined || s.lastUsedAt > best.lastUsedAt)) best = s
  return best
}
