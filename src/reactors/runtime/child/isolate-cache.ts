import ivm from 'isolated-vm'
import { discardContext, prepareContext, type SandboxContext } from './sandbox-context.js'
import { discardBlank, IsolateFactory } from './isolate-factory.js'
import { MODULE_FILENAME, MODULE_LINE_OFFSET, wrapModule } from './sandbox-source.js'

/** One isolate with the prelude and one Reactor's code compiled (not yet run: contexts are per call). */
export interface IsolateSlot {
  readonly id: number
  readonly isolate: ivm.Isolate
  readonly prelude: ivm.Script
  readonly module: ivm.Script
  /** The code cannot escape its wrapper, so evaluating `module` runs none of it (see createSlot). */
  readonly contained: boolean
  /** Kept after the call (the API process's ledger said so), unless it outgrew its heap or died. */
  keep: boolean
  busy: boolean
  /** The next call's context, prepared while idle (undefined: not yet, or preparing it failed). */
  spare: SandboxContext | undefined
  /** Cancels the spare's scheduled preparation, between a call's end and its start (see release). */
  cancelSpare: (() => void) | undefined
  /** When the last call ended (performance.now()), and how long the slot was idle before the last call. */
  releasedAt: number
  idleGapMs: number
  /** Contexts created since the last heap check (see freshContext). */
  sinceHeapCheck: number
}

/** What a cold start needs: the code, and which version it is (to remember `contained`). */
export interface FreshCode {
  reactorId: string
  version: string
  code: string
}

export interface CacheLimits {
  memoryMb: number
  payloadMaxBytes: number
}

/**
 * Contexts released from an isolate are not all reclaimed by V8 (measured: ~130 KB stays per
 * context whose code created closures), so a warm isolate is recycled once its heap passes this
 * share of the limit instead of letting it die mid-call of "memory limit".
 */
const RECYCLE_HEAP_FRACTION = 0.5
/**
 * The heap statistics walk every native context of the isolate; an isolate well under the
 * threshold (below half of it) is checked only every few contexts: a few contexts add a few
 * hundred KB, far from the limit, while each check cost about 15 µs per call.
 */
const HEAP_CHECK_EVERY = 8
/** How long after a call a warm isolate starts preparing the next call's context (see release). */
const SPARE_DELAY_MS = 1
/** Calls that follow each other closer than this count as back to back (see release). */
const BACK_TO_BACK_MS = 2
/** Versions whose `contained` verdict is remembered (a boolean each), beyond which the oldest go. */
const CONTAINED_MEMORY = 1024

/**
 * Per worker thread: the isolates the API process's ledger placed on this lane, by slot id.
 * A slot is created by the call that names it with its code (a cold start), serves the calls the
 * ledger sends it, and is disposed when the ledger drops it, or after its call when it is not to
 * be kept, has outgrown its heap, or died (deadline, memory). The worker never disposes an idle
 * kept slot on its own: the ledger would route the next call to a slot that no longer exists.
 */
export class IsolateCache {
  private readonly slots = new Map<number, IsolateSlot>()
  private readonly containedByVersion = new Map<string, boolean>()
  private readonly factory: IsolateFactory

  constructor(
    private readonly limits: CacheLimits,
    onCatastrophe: (message: string) => void,
  ) {
    this.factory = new IsolateFactory(limits, onCatastrophe)
  }

  /** The slot for a call: the existing warm one, or a new one from `fresh` (throws if the code does not compile). */
  async acquire(id: number, keep: boolean, fresh: FreshCode | undefined): Promise<IsolateSlot | undefined> {
    const existing = this.slots.get(id)
    if (existing !== undefined) {
      existing.busy = true
      existing.idleGapMs = performance.now() - existing.releasedAt
      return existing
    }
    if (fresh === undefined) return undefined
    const slot = await this.createSlot(id, fresh, keep)
    if (slot.keep) this.slots.set(id, slot)
    return slot
  }

  /** The call on `slot` ended; returns whether the slot stays (warm, alive). */
  release(slot: IsolateSlot): boolean {
    slot.busy = false
    if (!slot.keep || slot.isolate.isDisposed) {
      this.dispose(slot)
      return false
    }
    slot.releasedAt = performance.now()
    // The next call's context is prepared while idle, so that a warm call only runs the Reactor.
    // When calls come back to back it is needed at once. Otherwise it waits a moment: the answer
    // of the call that just ended still has to get out to the API process, and creating a
    // context (about 0.3 ms of CPU) on the same core would hold it up. A call that comes before
    // the spare is ready creates its own (see takeContext).
    const start = () => {
      slot.cancelSpare = undefined
      if (!slot.busy && !slot.isolate.isDisposed && slot.spare === undefined) slot.spare = this.prepareSpare(slot)
    }
    if (slot.idleGapMs < BACK_TO_BACK_MS) {
      const immediate = setImmediate(start)
      slot.cancelSpare = () => clearImmediate(immediate)
    } else {
      const timer = setTimeout(start, SPARE_DELAY_MS).unref()
      slot.cancelSpare = () => clearTimeout(timer)
    }
    return true
  }

  /** The context for the call that holds `slot`: the spare prepared while idle, or a new one. No call has used either. */
  takeContext(slot: IsolateSlot): SandboxContext {
    slot.cancelSpare?.()
    slot.cancelSpare = undefined
    const spare = slot.spare
    slot.spare = undefined
    return spare ?? this.freshContext(slot)
  }

  /** The ledger dropped these slots (idle ones; an unknown id was already disposed after its call). */
  drop(ids: number[]): void {
    for (const id of ids) {
      const slot = this.slots.get(id)
      if (slot !== undefined && !slot.busy) this.dispose(slot)
    }
  }

  /**
   * A spare for the idle slot. Past the heap threshold the slot is no longer kept: the next
   * call (the ledger will send one, or drop it) is its last.
   */
  private prepareSpare(slot: IsolateSlot): SandboxContext | undefined {
    try {
      return this.freshContext(slot)
    } catch {
      return undefined
    }
  }

  /**
   * A new context, then the heap check: checking right after a call would block this worker
   * thread until the isolate has cleaned up after that call, while once the context exists the
   * isolate is idle.
   */
  private freshContext(slot: IsolateSlot): SandboxContext {
    const context = prepareContext(slot.isolate, slot.prelude, slot.contained ? slot.module : undefined, this.limits.payloadMaxBytes)
    if (++slot.sinceHeapCheck >= HEAP_CHECK_EVERY || slot.sinceHeapCheck === 1) this.checkHeap(slot)
    return context
  }

  private checkHeap(slot: IsolateSlot): void {
    const heap = slot.isolate.getHeapStatisticsSync()
    const used = heap.used_heap_size + heap.externally_allocated_size
    const threshold = this.limits.memoryMb * 1024 * 1024 * RECYCLE_HEAP_FRACTION
    if (used > threshold) slot.keep = false
    // Near the threshold, check at every context; well below it, every few (see HEAP_CHECK_EVERY).
    slot.sinceHeapCheck = used > threshold / 2 ? 0 : 1
  }

  private async createSlot(id: number, fresh: FreshCode, keep: boolean): Promise<IsolateSlot> {
    const blank = await this.factory.take()
    const { isolate, prelude, context } = blank
    try {
      const module = await isolate.compileScript(wrapModule(fresh.code), { filename: MODULE_FILENAME, lineOffset: MODULE_LINE_OFFSET })
      const contained = await this.isContained(isolate, fresh)
      if (context !== undefined && contained) {
        module.runSync(context.context)
        context.evaluated = true
      }
      return { id, isolate, prelude, module, contained, keep, busy: true, spare: context, cancelSpare: undefined, releasedAt: performance.now(), idleGapMs: Infinity, sinceHeapCheck: 0 }
    } catch (err) {
      discardBlank(blank)
      throw err
    }
  }

  /** Whether this version compiles on its own (see compilesAlone); checked once per version. */
  private async isContained(isolate: ivm.Isolate, fresh: FreshCode): Promise<boolean> {
    const key = `${fresh.reactorId}\n${fresh.version}`
    const known = this.containedByVersion.get(key)
    if (known !== undefined) return known
    const contained = await compilesAlone(isolate, fresh.code)
    if (this.containedByVersion.size >= CONTAINED_MEMORY) this.containedByVersion.delete(this.containedByVersion.keys().next().value!)
    this.containedByVersion.set(key, contained)
    return contained
  }

  private dispose(slot: IsolateSlot): void {
    this.slots.delete(slot.id)
    slot.cancelSpare?.()
    slot.cancelSpare = undefined
    if (slot.spare !== undefined) discardContext(slot.spare, slot.isolate)
    slot.spare = undefined
    dispose(slot.isolate)
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
