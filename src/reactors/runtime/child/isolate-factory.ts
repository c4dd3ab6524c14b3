import ivm from 'isolated-vm'
import { discardContext, prepareContext, type SandboxContext } from './sandbox-context.js'
import { PRELUDE_SOURCE } from './sandbox-source.js'

/** A new isolate with the prelude compiled, and (when made in advance) a context prepared. */
export interface BlankIsolate {
  isolate: ivm.Isolate
  prelude: ivm.Script
  /** Prelude installed, no Reactor code yet: the cold start's context. */
  context: SandboxContext | undefined
}

/** How long after handing out a blank isolate the next one is made: after the cold call's answer is out. */
const REFILL_DELAY_MS = 5

/**
 * Makes the isolates of cold starts, one kept blank in advance per worker thread: a cold start
 * then only compiles the Reactor's code into an isolate and context that already exist (the
 * pre-warmed sandbox of serverless platforms), and the next blank is made while the worker is
 * otherwise idle. Costs one small isolate per worker.
 */
export class IsolateFactory {
  private preludeCache: ivm.ExternalCopy<ArrayBuffer> | undefined
  private next: Promise<BlankIsolate | undefined> | undefined
  private refilling = false

  constructor(
    private readonly limits: { memoryMb: number; payloadMaxBytes: number },
    private readonly onCatastrophe: (message: string) => void,
  ) {
    this.refill()
  }

  /** The blank made in advance if there is one, else a new one made now. */
  async take(): Promise<BlankIsolate> {
    const made = this.next
    this.next = undefined
    this.refill()
    return (await made) ?? this.create(false)
  }

  private refill(): void {
    if (this.next !== undefined || this.refilling) return
    this.refilling = true
    setTimeout(() => {
      this.refilling = false
      this.next ??= this.create(true).catch(() => undefined)
    }, REFILL_DELAY_MS).unref()
  }

  private async create(withContext: boolean): Promise<BlankIsolate> {
    const isolate = new ivm.Isolate({ memoryLimit: this.limits.memoryMb, onCatastrophicError: this.onCatastrophe })
    try {
      const prelude = this.compilePrelude(isolate)
      const context = withContext ? prepareContext(isolate, prelude, undefined, this.limits.payloadMaxBytes) : undefined
      // The first asynchronous task on a new isolate's thread costs about 1.5 ms more than the
      // next ones (measured after a context is prepared: compiling a one-line module took 2.0
      // instead of 0.4 ms). Made in advance, the isolate pays it here, not in the cold call.
      if (withContext) (await isolate.compileScript('void 0')).release()
      return { isolate, prelude, context }
    } catch (err) {
      isolate.dispose()
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
}

/** Releases a blank isolate that will not be used (its code did not compile). */
export function discardBlank(blank: BlankIsolate): void {
  if (blank.context !== undefined && !blank.isolate.isDisposed) discardContext(blank.context, blank.isolate)
  if (!blank.isolate.isDisposed) blank.isolate.dispose()
}
