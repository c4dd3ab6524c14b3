import type ivm from 'isolated-vm'
import { decodeRun } from './decode-run.js'
import { dispose, type IsolateSlot } from './isolate-cache.js'
import type { WireOutcome } from '../shared/protocol.js'
import type { BridgeLink, SandboxContext } from './sandbox-context.js'

export interface RunLimits {
  timeoutMs: number
  memoryMb: number
  payloadMaxBytes: number
  bridgeConcurrency: number
}

/**
 * How long a call may run synchronously on the worker thread (see runSync), which serves every
 * other call of its lane meanwhile.
 */
export const SYNC_BUDGET_MS = 10
/** A stopped run that used this much CPU (half the budget) was busy, not kept off the core. */
const BUSY_NS = BigInt(SYNC_BUDGET_MS * 500_000)
/** Stopped runs after which an isolate runs asynchronously for good, busy or not. */
const MAX_SYNC_STOPS = 2

/**
 * Runs one call in the context of `slot` (see sandbox-context.ts) and settles within `ms` at
 * the latest. isolated-vm's own `timeout` only bounds synchronous execution, not time spent
 * awaiting promises, so the deadline is a host timer that disposes the whole isolate: that
 * stops a `while(true){}`, an await loop and a never-settling promise alike.
 */
export async function runInvocation(slot: IsolateSlot, input: string, ms: number, link: BridgeLink, limits: RunLimits): Promise<WireOutcome> {
  if (ms <= 0) {
    link.close()
    return timeout(limits)
  }
  let timedOut = false
  const timer = setTimeout(() => {
    timedOut = true
    dispose(slot.isolate)
  }, ms)
  const sandbox = slot.context
  try {
    sandbox.relay.connect(link)
    const result = await callRun(slot, sandbox, input, ms, limits)
    // An isolate's first call runs asynchronously; once one has ended, the next ones start
    // synchronously unless the isolate was judged too slow for that.
    slot.hasRun = true
    return decodeRun(result, limits.payloadMaxBytes)
  } catch (err) {
    if (timedOut) return timeout(limits)
    return hostFailure(err, slot.isolate, limits)
  } finally {
    clearTimeout(timer)
    sandbox.relay.disconnect()
  }
}

async function callRun(slot: IsolateSlot, sandbox: SandboxContext, input: string, ms: number, limits: RunLimits): Promise<unknown> {
  // Code that may escape the wrapper could run something while the module is evaluated:
  // then it is evaluated only now, asynchronously, under the deadline of the first call.
  if (!sandbox.evaluated) {
    await slot.module.run(sandbox.context)
    sandbox.evaluated = true
  }
  if (slot.hasRun && !slot.tooSlowForSync && ms > SYNC_BUDGET_MS) {
    const ran = runSync(slot, sandbox, input, limits)
    if (ran !== STOPPED) return ran
  }
  return sandbox.entry.apply(undefined, ['run', input, limits.payloadMaxBytes, sandbox.relay.nextRun(), limits.bridgeConcurrency], { result: { promise: true, copy: true } })
}

const STOPPED = Symbol('stopped')

/**
 * The call on the worker thread itself, for an isolate that has ended a call before. An
 * asynchronous call hands the isolate to one of isolated-vm's threads and the result back: two
 * thread hand-offs, which cost the pre-configured proxy's trivial transforms more CPU than the
 * transforms themselves on a core the API process shares. Here the call runs until it waits on
 * a bridge call or ends (its microtasks run before `applySync` returns), for SYNC_BUDGET_MS of
 * wall time at most. Past that V8 stops it and drops its queued microtasks, the bridge calls it
 * made are dropped before they are posted (the relay numbers runs), and the call starts again
 * from the beginning the asynchronous way, under the same deadline. Nothing of the stopped run
 * is seen: its module scope was its own and the realm is frozen. Its lane waited the budget.
 * The isolate never runs synchronously again if the stopped run was busy (used half the budget
 * in CPU) or if it is the isolate's second stop: a run the scheduler merely kept off a
 * contended core once does not cost a quick Reactor its synchronous runs, and no isolate holds
 * its lane for the budget more than twice.
 * Returns the result, a promise of it when the call waits on a bridge, or STOPPED.
 */
function runSync(slot: IsolateSlot, sandbox: SandboxContext, input: string, limits: RunLimits): unknown {
  const cpuBefore = slot.isolate.cpuTime
  try {
    sandbox.entry.applySync(undefined, ['start', input, limits.payloadMaxBytes, sandbox.relay.nextRun(), limits.bridgeConcurrency], { timeout: SYNC_BUDGET_MS })
  } catch (err) {
    if (slot.isolate.isDisposed || !(err instanceof Error) || !/timed out/i.test(err.message)) throw err
    slot.syncStops += 1
    if (slot.syncStops >= MAX_SYNC_STOPS || slot.isolate.cpuTime - cpuBefore >= BUSY_NS) slot.tooSlowForSync = true
    return STOPPED
  }
  // No time limit: only the prelude runs now (the microtasks ran to the end within 'start'), and
  // a limit is wall time, which a contended core could pass and turn into a failed call.
  const result = sandbox.entry.applySync(undefined, ['take'], { result: { copy: true } })
  if (result !== null) return result
  return sandbox.entry.apply(undefined, ['wait'], { result: { promise: true, copy: true } })
}

function timeout(limits: RunLimits): WireOutcome {
  return { kind: 'error', code: 'reactor_timeout', detail: `The Reactor did not finish within ${limits.timeoutMs} ms.` }
}

function hostFailure(err: unknown, isolate: ivm.Isolate, limits: RunLimits): WireOutcome {
  const message = err instanceof Error ? err.message : String(err)
  if (isolate.isDisposed || /memory limit/i.test(message)) {
    return { kind: 'error', code: 'reactor_error', detail: `The Reactor exceeded its memory limit of ${limits.memoryMb} MB.` }
  }
  // Errors here come from the runtime, not from Reactor code (which `run` catches itself);
  // only the first line goes out, never a host stack.
  return { kind: 'error', code: 'reactor_error', detail: `The Reactor failed: ${message.split('\n')[0] ?? 'unknown error'}` }
}
