import ivm from 'isolated-vm'
import { isBridgeOp, type BridgeOp } from '../shared/protocol.js'
import { BRIDGE_GLOBAL } from './sandbox-source.js'

/** Bounds how hard one invocation can lean on the vault or the network through its bridges. */
const MAX_BRIDGE_CALLS = 1000

type FnRef = ivm.Reference<(...args: unknown[]) => unknown>

/**
 * An isolate's one context: the prelude installed and the realm hardened (see sandbox-source.ts),
 * then serving every call of the isolate in turn. Calls share nothing writable: each
 * instantiates the module afresh in a frozen realm.
 */
export interface SandboxContext {
  context: ivm.Context
  /** The prelude's one entry point: `('run', input, maxChars)` or `('deliver', callId, ok, text)`. */
  entry: FnRef
  relay: BridgeRelay
}

/**
 * Creating and hardening a context costs milliseconds, so it happens once per isolate, for a
 * cold start ahead of time (see IsolateFactory). Only our prelude runs here, synchronously: it
 * is small and trusted. `containedModule` is evaluated too: it only hands the factory function
 * over, since the code was checked not to escape the wrapper (see wrapperEscape). Nothing the
 * Reactor wrote runs outside an invocation and its deadline.
 */
export function prepareContext(isolate: ivm.Isolate, prelude: ivm.Script, containedModule: ivm.Script | undefined, payloadMaxBytes: number): SandboxContext {
  const context = isolate.createContextSync()
  const relay = new BridgeRelay(payloadMaxBytes)
  context.global.setSync(BRIDGE_GLOBAL, new ivm.Callback(relay.onCall, { ignored: true }))
  const entry = prelude.runSync(context, { reference: true }) as FnRef
  relay.attach(entry)
  containedModule?.runSync(context)
  return { context, entry, relay }
}

/** Releases everything: any live Reference would pin the context (and its heap) in the isolate. */
export function discardContext(sandbox: SandboxContext, isolate: ivm.Isolate): void {
  sandbox.relay.close()
  release(sandbox.entry)
  if (!isolate.isDisposed) sandbox.context.release()
}

export function release(ref: { release(): void } | undefined): void {
  try {
    ref?.release()
  } catch {
    // The isolate is already disposed (deadline or memory limit), which released it.
  }
}

/** One invocation's way to the API process: the worker's lane, scoped to the invocation's id (see worker.ts). */
export interface BridgeLink {
  post(call: { callId: number; op: BridgeOp; json: string }): void
  /** Answers to this invocation's calls go to `onAnswer` until `close()`. */
  listen(onAnswer: (callId: number, ok: boolean, json: string) => void): void
  close(): void
}

/** Forwards the Reactor's bridge calls to the API process and delivers the answers. */
export class BridgeRelay {
  private entry: FnRef | undefined
  private link: BridgeLink | undefined
  private calls = 0
  /** The run of the Reactor that may call now (see `nextRun`). */
  private run = 0

  constructor(private readonly maxBytes: number) {}

  attach(entry: FnRef): void {
    this.entry = entry
  }

  /** The invocation's own link, for the length of one call; its bridge-call budget starts afresh. */
  connect(link: BridgeLink): void {
    this.link = link
    this.calls = 0
    link.listen((callId, ok, json) => this.answer(callId, ok, json))
  }

  /**
   * Numbers a new run of the Reactor (the prelude tags its bridge calls with it): from now on
   * only its calls go out, with the budget afresh. Calls of an earlier run still arriving (the
   * bridge callback reaches this thread asynchronously) are dropped, unanswered: that run was
   * stopped and started again (see invocation.ts), so nothing it asked for may happen.
   */
  nextRun(): number {
    this.calls = 0
    return ++this.run
  }

  /** The call ended: answers still owed to it are never delivered, later calls of its code are refused. */
  disconnect(): void {
    this.link?.close()
    this.link = undefined
  }

  /** No more answers go in (the entry itself is released with the context). */
  close(): void {
    this.disconnect()
    this.entry = undefined
  }

  /** Arguments come straight from Reactor code: anything may arrive here. */
  readonly onCall = (op: unknown, json: unknown, callId: unknown, run: unknown): void => {
    if (typeof callId !== 'number' || run !== this.run) return
    if (!isBridgeOp(op) || typeof json !== 'string') return this.answer(callId, false, 'Unknown service call.')
    if (++this.calls > MAX_BRIDGE_CALLS) return this.answer(callId, false, `A Reactor may make at most ${MAX_BRIDGE_CALLS} service calls per invocation.`)
    if (Buffer.byteLength(json) > this.maxBytes) return this.answer(callId, false, `The argument of ${op} is larger than the ${this.maxBytes}-byte limit.`)
    if (this.link === undefined) return this.answer(callId, false, 'The invocation has ended.')
    this.link.post({ callId, op, json })
  }

  private answer(callId: number, ok: boolean, json: string): void {
    // After the call ended the context is gone; a late answer has nowhere to go.
    this.entry?.apply(undefined, ['deliver', callId, ok, json]).catch(() => undefined)
  }
}
