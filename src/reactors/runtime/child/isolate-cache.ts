import ivm from 'isolated-vm'
import { discardContext, prepareContext, type SandboxContext } from './sandbox-context.js'
import { discardBlank, IsolateFactory } from './isolate-factory.js'
import { wrapperEscape } from './module-body.js'
import { MODULE_FILENAME, MODULE_LINE_OFFSET, wrapModule } from './sandbox-source.js'

/** One isolate with the prelude and one Reactor's code compiled, and the one context its calls run in. */
export interface IsolateSlot {
  readonly id: number
  readonly isolate: ivm.Isolate
  readonly module: ivm.Script
  readonly context: SandboxContext
  /** Kept after the call (the API process's ledger said so), unless it outgrew its heap or died. */
  keep: boolean
  busy: boolean
  /** Calls since the last heap check (see release). */
  sinceHeapCheck: number
  /** It has ended a call: its next ones start synchronously on the worker thread (invocation.ts)... */
  hasRun: boolean
  /** ...unless it was judged too slow for that (see invocation.ts): never again on this isolate. */
  tooSlowForSync: boolean
  /** Synchronous runs stopped at SYNC_BUDGET_MS (and started again). */
  syncStops: number
}

/** What a cold start needs: the code, and which version it is (to remember whether it escapes its wrapper). */
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
 * Garbage of earlier calls, and what closures they left running hold, stays in the isolate's
 * heap: a warm isolate is recycled once its heap passes this share of the limit instead of
 * letting it die mid-call of "memory limit".
 */
const RECYCLE_HEAP_FRACTION = 0.5
/**
 * The heap statistics walk the isolate's heap: an isolate well under the threshold (below half
 * of it) is checked only every few calls (and after its first); a few calls add little, while
 * each check cost about 15 µs.
 */
const HEAP_CHECK_EVERY = 4
/** Versions whose wrapper verdict is remembered (see wrapperEscape), beyond which the oldest go. */
const ESCAPE_MEMORY = 1024
/**
 * Disposing an isolate costs about 0.9 ms of this thread: done that long after the call that
 * let it go, so the call's answer (and a cold start waiting behind a retired version's drop)
 * does not wait for it.
 */
const DISPOSE_DELAY_MS = 10

/**
 * Per worker thread: the isolates the API process's ledger placed on this lane, by slot id.
 * A slot is created by the call that names it with its code (a cold start), serves the calls the
 * ledger sends it, and is disposed when the ledger drops it, or after its call when it is not to
 * be kept, has outgrown its heap, or died (deadline, memory). The worker never disposes an idle
 * kept slot on its own: the ledger would route the next call to a slot that no longer exists.
 */
export class IsolateCache {
  private readonly slots = new Map<number, IsolateSlot>()
  /** By version: null when the code stays in its wrapper, else why it does not. */
  private readonly escapeByVersion = new Map<string, string | null>()
  private readonly factory: IsolateFactory
  private readonly graveyard: IsolateSlot[] = []

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
    if (++slot.sinceHeapCheck >= HEAP_CHECK_EVERY) this.checkHeap(slot)
    return true
  }

  /** Whether slot `id` is held here (a warm isolate). */
  holds(id: number): boolean {
    return this.slots.has(id)
  }

  /** The ledger dropped these slots (idle ones; an unknown id was already disposed after its call). */
  drop(ids: number[]): void {
    for (const id of ids) {
      const slot = this.slots.get(id)
      if (slot !== undefined && !slot.busy) this.dispose(slot)
    }
  }

  /**
   * Past the heap threshold the slot is no longer kept: its next call (the ledger will send one,
   * or drop it) is its last. Asynchronous, so the worker thread never waits on an isolate
   * that is still busy (closures a call left running).
   */
  private checkHeap(slot: IsolateSlot): void {
    slot.sinceHeapCheck = 0
    slot.isolate.getHeapStatistics().then(
      (heap) => {
        const used = heap.used_heap_size + heap.externally_allocated_size
        const threshold = this.limits.memoryMb * 1024 * 1024 * RECYCLE_HEAP_FRACTION
        if (used > threshold) slot.keep = false
        // Near the threshold, check after every call; well below it, every few (see HEAP_CHECK_EVERY).
        else if (used > threshold / 2) slot.sinceHeapCheck = HEAP_CHECK_EVERY
      },
      () => undefined,
    )
  }

  private async createSlot(id: number, fresh: FreshCode, keep: boolean): Promise<IsolateSlot> {
    const blank = await this.factory.take()
    const { isolate, prelude, context } = blank
    try {
      const module = await isolate.compileScript(wrapModule(fresh.code), { filename: MODULE_FILENAME, lineOffset: MODULE_LINE_OFFSET })
      const sandbox = context ?? prepareContext(isolate, prelude, undefined, this.limits.payloadMaxBytes)
      // Code that escapes the wrapper is refused (saves check it too; this holds for code
      // saved before they did): evaluating the module then only hands the factory over.
      const escape = await this.escapeOf(isolate, sandbox.context, fresh)
      if (escape !== null) throw new SyntaxError(escape)
      module.runSync(sandbox.context)
      return { id, isolate, module, context: sandbox, keep, busy: true, sinceHeapCheck: HEAP_CHECK_EVERY - 1, hasRun: false, tooSlowForSync: false, syncStops: 0 }
    } catch (err) {
      discardBlank(blank)
      throw err
    }
  }

  /** Why this version escapes its wrapper, or null (see wrapperEscape); checked once per version. */
  private async escapeOf(isolate: ivm.Isolate, context: ivm.Context, fresh: FreshCode): Promise<string | null> {
    const key = `${fresh.reactorId}\n${fresh.version}`
    const known = this.escapeByVersion.get(key)
    if (known !== undefined) return known
    const escape = (await wrapperEscape(isolate, fresh.code, context)) ?? null
    if (this.escapeByVersion.size >= ESCAPE_MEMORY) this.escapeByVersion.delete(this.escapeByVersion.keys().next().value!)
    this.escapeByVersion.set(key, escape)
    return escape
  }

  /** Out of the cache now; disposed DISPOSE_DELAY_MS later, with any others let go meanwhile. */
  private dispose(slot: IsolateSlot): void {
    this.slots.delete(slot.id)
    if (this.graveyard.push(slot) > 1) return
    setTimeout(() => {
      for (const gone of this.graveyard.splice(0)) {
        discardContext(gone.context, gone.isolate)
        dispose(gone.isolate)
      }
    }, DISPOSE_DELAY_MS)
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
