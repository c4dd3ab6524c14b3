import type ivm from 'isolated-vm'
import { decodeRun } from './decode-run.js'
import { dispose, type IsolateSlot } from './isolate-cache.js'
import type { WireOutcome } from '../shared/protocol.js'
import type { BridgeLink, SandboxContext } from './sandbox-context.js'

export interface RunLimits {
  timeoutMs: number
  memoryMb: number
  payloadMaxBytes: number
}

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
    const result = await callRun(slot, sandbox, input, limits)
    return decodeRun(result, limits.payloadMaxBytes)
  } catch (err) {
    if (timedOut) return timeout(limits)
    return hostFailure(err, slot.isolate, limits)
  } finally {
    clearTimeout(timer)
    sandbox.relay.disconnect()
  }
}

async function callRun(slot: IsolateSlot, sandbox: SandboxContext, input: string, limits: RunLimits): Promise<unknown> {
  // Code that may escape the wrapper could run something while the module is evaluated:
  // then it is evaluated only now, asynchronously, under the deadline of the first call.
  if (!sandbox.evaluated) {
    await slot.module.run(sandbox.context)
    sandbox.evaluated = true
  }
  return sandbox.entry.apply(undefined, ['run', input, limits.payloadMaxBytes], { result: { promise: true, copy: true } })
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
