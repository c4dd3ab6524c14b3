import ivm from 'isolated-vm'
import { isBridgeOp, type PortBridgeCall, type PortBridgeResult } from './protocol.js'
import { BRIDGE_GLOBAL } from './sandbox-source.js'

/** Bounds how hard one invocation can lean on the vault or the network through its bridges. */
const MAX_BRIDGE_CALLS = 1000

type FnRef = ivm.Reference<(...args: unknown[]) => unknown>

/**
 * A new context with the prelude installed and no Reactor code run yet. Contexts are never
 * reused: each one serves exactly one invocation, then is released.
 */
export interface SandboxContext {
  context: ivm.Context
  run: FnRef
  relay: BridgeRelay
  /** The module factory, when the code was proven unable to run anything at evaluation. */
  factory: ivm.Reference<unknown> | undefined
}

/**
 * Creating a context costs ~0.25 ms, so a warm isolate prepares its next one while idle
 * (see IsolateCache). Only our prelude runs here, synchronously: it is small and trusted.
 * `containedModule` is evaluated too: it only creates the factory function, since the code was
 * checked not to escape the wrapper (see IsolateCache). Nothing the Reactor wrote runs outside
 * an invocation and its deadline.
 */
export async function prepareContext(isolate: ivm.Isolate, prelude: ivm.Script, containedModule: ivm.Script | undefined, payloadMaxBytes: number): Promise<SandboxContext> {
  const context = await isolate.createContext()
  const relay = new BridgeRelay(payloadMaxBytes)
  context.global.setSync(BRIDGE_GLOBAL, new ivm.Callback(relay.onCall, { ignored: true }))
  const exported = prelude.runSync(context, { reference: true }) as ivm.Reference<Record<string, unknown>>
  const run = exported.getSync('run', { reference: true }) as FnRef
  relay.attach(exported.getSync('deliver', { reference: true }) as FnRef)
  exported.release()
  const factory = containedModule?.runSync(context, { reference: true }) as ivm.Reference<unknown> | undefined
  return { context, run, relay, factory }
}

/** Releases everything: any live Reference would pin the context (and its heap) in the isolate. */
export function discardContext(sandbox: SandboxContext, isolate: ivm.Isolate): void {
  release(sandbox.run)
  release(sandbox.factory)
  sandbox.relay.close()
  if (!isolate.isDisposed) sandbox.context.release()
}

export function release(ref: { release(): void } | undefined): void {
  try {
    ref?.release()
  } catch {
    // The isolate is already disposed (deadline or memory limit), which released it.
  }
}

/** One invocation's way to the child main thread: the worker's bridge port, scoped to its id (see worker.ts). */
export interface BridgeLink {
  post(call: Omit<PortBridgeCall, 'id'>): void
  /** Answers to this invocation's calls go to `onAnswer` until `close()`. */
  listen(onAnswer: (answer: PortBridgeResult) => void): void
  close(): void
}

/** Forwards the Reactor's bridge calls to the child main thread and delivers the answers. */
export class BridgeRelay {
  private deliver: FnRef | undefined
  private link: BridgeLink | undefined
  private calls = 0

  constructor(private readonly maxBytes: number) {}

  attach(deliver: FnRef): void {
    this.deliver = deliver
  }

  /** The invocation's own link; bound only when the context is taken for a call. */
  connect(link: BridgeLink): void {
    this.link = link
    link.listen((m) => this.answer(m.callId, m.ok, m.json))
  }

  close(): void {
    release(this.deliver)
    this.deliver = undefined
    this.link?.close()
    this.link = undefined
  }

  /** Arguments come straight from Reactor code: anything may arrive here. */
  readonly onCall = (op: unknown, json: unknown, callId: unknown): void => {
    if (typeof callId !== 'number') return
    if (!isBridgeOp(op) || typeof json !== 'string') return this.answer(callId, false, 'Unknown service call.')
    if (++this.calls > MAX_BRIDGE_CALLS) return this.answer(callId, false, `A Reactor may make at most ${MAX_BRIDGE_CALLS} service calls per invocation.`)
    if (Buffer.byteLength(json) > this.maxBytes) return this.answer(callId, false, `The argument of ${op} is larger than the ${this.maxBytes}-byte limit.`)
    if (this.link === undefined) return this.answer(callId, false, 'The invocation has ended.')
    this.link.post({ callId, op, json })
  }

  private answer(callId: number, ok: boolean, json: string): void {
    // After the call ended the context is gone; a late answer has nowhere to go.
    this.deliver?.apply(undefined, [callId, ok, json]).catch(() => undefined)
  }
}
