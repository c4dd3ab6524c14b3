import ivm from 'isolated-vm'
import type { StartKind } from './protocol.js'
import { discardContext, prepareContext, type SandboxContext } from './sandbox-context.js'
import { MODULE_FILENAME, MODULE_LINE_OFFSET, PRELUDE_SOURCE, wrapModule } from './sandbox-source.js'

/** One isolate with the prelude and one Reactor's code compiled (not yet run: contexts are per call). */
export interface IsolateSlot {
  readonly isolate: ivm.Isolate
  readonly prelude: ivm.Script
  readonly module: ivm.Script
  /** The code cannot escape its wrapper, so evaluating `module` runs none of it (see createSlot). */
  readonly contained: boolean
  /** Kept after the call (one of the Reactor's hot isolates) or disposed after it (cold extra). */
  warm: boolean
  busy: boolean
  lastUsedAt: number
  /** The next call's context, prepared while idle; undefined if preparing it failed. */
  spare: Promise<SandboxContext | undefined> | undefined
  /** Cancels the spare's scheduled preparation, between a call's end and its start (see release). */
  cancelSpare: (() => void) | undefined
  /** When the last call ended (performance.now()), and how long the slot was idle before the last call. */
  releasedAt: number
  idleGapMs: number
}

interface ReactorEntry {
  version: string
  slots: IsolateSlot[]
  /** Warm slots being created right now; counted so concurrent cold starts don't overfill. */
  creating: number
  /** Whether this version's code compiles on its own (see compilesAlone); checked once. */
  contained: boolean | undefined
}

export interface CacheLimits {
  memoryMb: number
  hotConcurrency: number
  payloadMaxBytes: number
}

/**
 * Contexts released from an isolate are not all reclaimed by V8 (measured: ~130 KB stays per
 * context whose code created closures), so a warm isolate is recycled once its heap passes this
 * share of the limit instead of letting it die mid-call of "memory limit".
 */
const RECYCLE_HEAP_FRACTION = 0.5
const IDLE_DISPOSE_MS = 5 * 60_000
/** How long after a call a warm isolate starts preparing the next call's context (see release). */
const SPARE_DELAY_MS = 1
/** Calls that follow each other closer than this count as back to back (see release). */
const BACK_TO_BACK_MS = 2
const SWEEP_INTERVAL_MS = 60_000

/**
 * Per worker thread: each Reactor keeps up to `hotConcurrency` warm isolates; calls beyond that
 * get a cold isolate created for them and disposed after. A Reactor is pinned to one worker by
 * the pool's balancer, so this per-thread count is the Reactor's count.
 */
export class IsolateCache {
  private readonly entries = new Map<string, ReactorEntry>()
  private preludeCache: ivm.ExternalCopy<ArrayBuffer> | undefined

  constructor(
    private readonly limits: CacheLimits,
    private readonly onCatastrophe: (message: string) => void,
  ) {
    // Lives as long as the worker thread; unref'd so it never keeps the thread alive.
    setInterval(() => this.sweepIdle(Date.now()), SWEEP_INTERVAL_MS).unref()
  }

  async acquire(reactorId: string, version: string, code: string): Promise<{ slot: IsolateSlot; start: StartKind }> {
    let entry = this.entries.get(reactorId)
    if (entry !== undefined && entry.version !== version) {
      this.retire(reactorId)
      entry = undefined
    }
    if (entry === undefined) {
      entry = { version, slots: [], creating: 0, contained: undefined }
      this.entries.set(reactorId, entry)
    }
    const idle = entry.slots.find((s) => !s.busy)
    if (idle !== undefined) {
      idle.busy = true
      idle.idleGapMs = performance.now() - idle.releasedAt
      return { slot: idle, start: 'warm' }
    }
    const warm = entry.slots.length + entry.creating < this.limits.hotConcurrency
    if (warm) entry.creating++
    try {
      const slot = await this.createSlot(code, warm, entry)
      // The code may have been retired while this isolate compiled: then it serves this call only.
      if (warm && this.entries.get(reactorId) === entry) entry.slots.push(slot)
      else slot.warm = false
      return { slot, start: 'cold' }
    } finally {
      if (warm) entry.creating--
    }
  }

  release(reactorId: string, slot: IsolateSlot): void {
    slot.busy = false
    slot.lastUsedAt = Date.now()
    if (!slot.warm || slot.isolate.isDisposed) return this.drop(reactorId, slot)
    slot.releasedAt = performance.now()
    // The next call's context is prepared while idle, so that a warm call only runs the Reactor.
    // When calls come back to back it is needed at once. Otherwise it waits a moment: the answer
    // of the call that just ended still has to get out through this process and the API process,
    // and creating a context (about 0.3 ms of CPU) on the same core would hold it up. A call
    // that comes before the spare is ready creates its own context (see takeContext).
    const start = () => {
      slot.cancelSpare = undefined
      if (!slot.busy && !slot.isolate.isDisposed && slot.spare === undefined) slot.spare = this.prepareSpare(reactorId, slot)
    }
    if (slot.idleGapMs < BACK_TO_BACK_MS) {
      const immediate = setImmediate(start)
      slot.cancelSpare = () => clearImmediate(immediate)
    } else {
      const timer = setTimeout(start, SPARE_DELAY_MS).unref()
      slot.cancelSpare = () => clearTimeout(timer)
    }
  }

  /** The context for the call that holds `slot`: the spare prepared while idle, or a new one. No call has used either. */
  async takeContext(slot: IsolateSlot): Promise<SandboxContext> {
    slot.cancelSpare?.()
    slot.cancelSpare = undefined
    const spare = slot.spare
    slot.spare = undefined
    return (await spare) ?? this.freshContext(slot)
  }

  /** A spare for the idle slot; recycled right away (undefined) if the heap check says so. */
  private async prepareSpare(reactorId: string, slot: IsolateSlot): Promise<SandboxContext | undefined> {
    try {
      const context = await this.freshContext(slot)
      if (slot.warm || slot.busy) return context
      discardContext(context, slot.isolate)
      this.drop(reactorId, slot)
      return undefined
    } catch {
      return undefined
    }
  }

  /**
   * A new context, then the heap check: checking right after a call would block this worker
   * thread until the isolate has cleaned up after that call, while once the context exists the
   * isolate is idle. Past the threshold the slot stops being warm: the call that takes this
   * context is its last (see release), or it goes now if idle (see prepareSpare).
   */
  private async freshContext(slot: IsolateSlot): Promise<SandboxContext> {
    const context = await prepareContext(slot.isolate, slot.prelude, slot.contained ? slot.module : undefined, this.limits.payloadMaxBytes)
    if (this.heapTooHigh(slot)) slot.warm = false
    return context
  }

  /** New code or a deleted Reactor: idle isolates go now, busy ones when their call ends. */
  retire(reactorId: string): void {
    const entry = this.entries.get(reactorId)
    if (entry === undefined) return
    this.entries.delete(reactorId)
    for (const slot of entry.slots) {
      slot.warm = false
      slot.cancelSpare?.()
      if (!slot.busy) dispose(slot.isolate)
    }
  }

  private async createSlot(code: string, warm: boolean, entry: ReactorEntry): Promise<IsolateSlot> {
    const isolate = new ivm.Isolate({ memoryLimit: this.limits.memoryMb, onCatastrophicError: this.onCatastrophe })
    try {
      const prelude = this.compilePrelude(isolate)
      const module = await isolate.compileScript(wrapModule(code), { filename: MODULE_FILENAME, lineOffset: MODULE_LINE_OFFSET })
      entry.contained ??= await compilesAlone(isolate, code)
      const contained = entry.contained
      return { isolate, prelude, module, contained, warm, busy: true, lastUsedAt: Date.now(), spare: undefined, cancelSpare: undefined, releasedAt: performance.now(), idleGapMs: Infinity }
    } catch (err) {
      dispose(isolate)
      throw err
    }
  }

  /**
   * Every isolate compiles the same prelude: V8's code cache from the first compile in this
   * thread makes the others cheaper (about a quarter of the time). V8 checks the cache against
   * the source and its own version, and compiles normally if it does not fit.
   */
  private compilePrelude(isolate: ivm.Isolate): ivm.Script {
    // isolated-vm sets these on the script; its typings only declare them for other results.
    type Cached = ivm.Script & { cachedData?: ivm.ExternalCopy<ArrayBuffer>; cachedDataRejected?: boolean }
    if (this.preludeCache === undefined) {
      const script = isolate.compileScriptSync(PRELUDE_SOURCE, { filename: 'prelude.js', produceCachedData: true }) as Cached
      this.preludeCache = script.cachedData
      return script
    }
    const script = isolate.compileScriptSync(PRELUDE_SOURCE, { filename: 'prelude.js', cachedData: this.preludeCache }) as Cached
    if (script.cachedDataRejected === true) this.preludeCache = undefined
    return script
  }

  private heapTooHigh(slot: IsolateSlot): boolean {
    const heap = slot.isolate.getHeapStatisticsSync()
    return heap.used_heap_size + heap.externally_allocated_size > this.limits.memoryMb * 1024 * 1024 * RECYCLE_HEAP_FRACTION
  }

  private drop(reactorId: string, slot: IsolateSlot): void {
    const entry = this.entries.get(reactorId)
    if (entry !== undefined) entry.slots = entry.slots.filter((s) => s !== slot)
    slot.cancelSpare?.()
    dispose(slot.isolate)
  }

  private sweepIdle(now: number): void {
    for (const [reactorId, entry] of this.entries) {
      for (const slot of entry.slots) {
        if (!slot.busy && now - slot.lastUsedAt > IDLE_DISPOSE_MS) this.drop(reactorId, slot)
      }
      if (entry.slots.length === 0 && entry.creating === 0) this.entries.delete(reactorId)
    }
  }
}

/**
 * Code that is a valid script on its own has balanced braces in the very same token stream, so
 * inside `(function (module, exports) {...})` it cannot close the wrapper early and put
 * statements at the top level. (Code that only compiles wrapped, e.g. with a top-level
 * `return`, still works; it is just evaluated the slow, careful way.)
 */
async function compilesAlone(isolate: ivm.Isolate, code: string): Promise<boolean> {
  try {
    const script = await isolate.compileScript(code)
    script.release()
    return true
  } catch {
    return false
  }
}

export function dispose(isolate: ivm.Isolate): void {
  if (isolate.isDisposed) return
  try {
    isolate.dispose()
  } catch {
    // Disposing races with ivm's own disposal after a memory-limit hit; either way it is gone.
  }
}
