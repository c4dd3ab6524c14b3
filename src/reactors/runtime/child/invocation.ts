import type ivm from 'isolated-vm'
import { decodeRun, REACTOR_MESSAGE_MAX_CHARS } from './decode-run.js'
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
 *
 * The answer at the deadline does not wait for the disposed isolate's call to settle: V8 stops
 * it only when it comes back from native code it is in (an ICU call ran on for seconds), and the
 * API process kills the whole runtime when a lane misses a deadline by LANE_GRACE_MS. The
 * isolate is disposed and leaves the cache with this answer (the worker releases it as not
 * kept), so nothing else runs on it; the thread of isolated-vm still inside it finishes alone,
 * and whatever that call posts meanwhile is dropped (its relay is disconnected here).
 */
export async function runInvocation(slot: IsolateSlot, input: string, ms: number, link: BridgeLink, limits: RunLimits): Promise<WireOutcome> {
  if (ms <= 0) {
    link.close()
    return timeout(limits)
  }
  let timedOut = false
  let timer: NodeJS.Timeout | undefined
  const deadline = new Promise<WireOutcome>((resolve) => {
    timer = setTimeout(() => {
      timedOut = true
      dispose(slot.isolate)
      resolve(timeout(limits))
    }, ms)
  })
  const sandbox = slot.context
  sandbox.relay.connect(link)
  const ran = callRun(slot, sandbox, input, ms, limits).then(
    (result) => {
      // An isolate's first call runs asynchronously; once one has ended, the next ones start
      // synchronously unless the isolate was judged too slow for that.
      slot.hasRun = true
      return decodeRun(result, limits.payloadMaxBytes)
    },
    (err: unknown) => (timedOut ? timeout(limits) : hostFailure(err, slot.isolate, limits)),
  )
  try {
    return await Promise.race([ran, deadline])
  } finally {
    clearTimeout(timer)
    sandbox.relay.disconnect()
  }
}

async function callRun(slot: IsolateSlot, sandbox: SandboxContext, input: string, ms: number, limits: RunLimits): Promise<unknown> {
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

/** Errors whose messages quote values (revealed data, in a Reactor): never passed on. */
const ENGINE_ERRORS = new Set(['SyntaxError', 'TypeError', 'RangeError', 'ReferenceError', 'URIError', 'EvalError'])

/**
 * Errors here come from the runtime, not from Reactor code (which `run` catches itself, and the
 * module's evaluation only hands its factory over: code that escapes the wrapper is refused,
 * see module-body.ts). Still, the detail follows the rules of a Reactor's message: an engine
 * error's text is withheld, the rest cut to REACTOR_MESSAGE_MAX_CHARS, only its first line and
 * never a host stack.
 */
function hostFailure(err: unknown, isolate: ivm.Isolate, limits: RunLimits): WireOutcome {
  const message = err instanceof Error ? err.message : String(err)
  if (isolate.isDisposed || /memory limit/i.test(message)) {
    return { kind: 'error', code: 'reactor_error', detail: `The Reactor exceeded its memory limit of ${limits.memoryMb} MB.` }
  }
  if (err instanceof Error && ENGINE_ERRORS.has(err.name)) {
    return { kind: 'error', code: 'reactor_error', detail: `The Reactor failed with a ${err.name} (its message is withheld: it may quote data)` }
  }
  const line = message.split('\n')[0] ?? 'unknown error'
  const text = line.length > REACTOR_MESSAGE_MAX_CHARS ? `${line.slice(0, REACTOR_MESSAGE_MAX_CHARS)}...` : line
  return { kind: 'error', code: 'reactor_error', detail: `The Reactor failed: ${text}` }
}
