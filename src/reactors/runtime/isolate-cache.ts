import ivm from 'isolated-vm'
import type { StartKind } from './protocol.js'
import { prepareContext, type SandboxContext } from './sandbox-context.js'
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
const SWEEP_INTERVAL_MS = 60_000

/**
 * Per worker thread: each Reactor keeps up to `hotConcurrency` warm isolates; calls beyond that
 * get a cold isolate created for them and disposed after. A Reactor is pinned to one worker by
 * the pool's balancer, so this per-thread count is the Reactor's count.
 */
export class IsolateCache {
  private readonly entries = new Map<string, ReactorEntry>()

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
    if (!slot.warm || slot.isolate.isDisposed || this.heapTooHigh(slot)) return this.drop(reactorId, slot)
    // Off the critical path: the next warm call then only runs the Reactor.
    slot.spare = prepareContext(slot.isolate, slot.prelude, slot.contained ? slot.module : undefined, this.limits.payloadMaxBytes).catch(() => undefined)
  }

  /** New code or a deleted Reactor: idle isolates go now, busy ones when their call ends. */
  retire(reactorId: string): void {
    const entry = this.entries.get(reactorId)
    if (entry === undefined) return
    this.entries.delete(reactorId)
    for (const slot of entry.slots) {
      slot.warm = false
      if (!slot.busy) dispose(slot.isolate)
    }
  }

  private async createSlot(code: string, warm: boolean, entry: ReactorEntry): Promise<IsolateSlot> {
    const isolate = new ivm.Isolate({ memoryLimit: this.limits.memoryMb, onCatastrophicError: this.onCatastrophe })
    try {
      const prelude = isolate.compileScriptSync(PRELUDE_SOURCE, { filename: 'prelude.js' })
      const module = await isolate.compileScript(wrapModule(code), { filename: MODULE_FILENAME, lineOffset: MODULE_LINE_OFFSET })
      entry.contained ??= await compilesAlone(isolate, code)
      const contained = entry.contained
      return { isolate, prelude, module, contained, warm, busy: true, lastUsedAt: Date.now(), spare: undefined }
    } catch (err) {
      dispose(isolate)
      throw err
    }
  }

  private heapTooHigh(slot: IsolateSlot): boolean {
    const heap = slot.isolate.getHeapStatisticsSync()
    return heap.used_heap_size + heap.externally_allocated_size > this.limits.memoryMb * 1024 * 1024 * RECYCLE_HEAP_FRACTION
  }

  private drop(reactorId: string, slot: IsolateSlot): void {
    const entry = this.entries.get(reactorId)
    if (entry !== undefined) entry.slots = entry.slots.filter((s) => s !== slot)
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
