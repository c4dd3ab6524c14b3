import t from 'tap'
import type { IsolateSlot } from '../../../src/reactors/runtime/child/isolate-cache.js'
import { runInvocation } from '../../../src/reactors/runtime/child/invocation.js'
import type { BridgeLink } from '../../../src/reactors/runtime/child/sandbox-context.js'

const limits = { timeoutMs: 50, memoryMb: 64, payloadMaxBytes: 1024, bridgeConcurrency: 8 }

/**
 * A slot whose isolate's call does not settle when the isolate is disposed: as Intl.Segmenter's
 * ICU loop did for seconds (V8 stops it only once it leaves the native code).
 */
function stuckSlot(): { slot: IsolateSlot; settle: (err: Error) => void; disposed: () => boolean; connected: () => boolean } {
  let settle: (err: Error) => void = () => undefined
  let connected = false
  const isolate = {
    isDisposed: false,
    cpuTime: 0n,
    dispose() {
      this.isDisposed = true
    },
  }
  const relay = {
    connect: () => void (connected = true),
    disconnect: () => void (connected = false),
    nextRun: () => 1,
  }
  const entry = { apply: () => new Promise((_resolve, reject) => (settle = reject)) }
  const slot = { id: 1, isolate, module: {}, context: { context: {}, entry, relay }, keep: true, busy: true, sinceHeapCheck: 0, hasRun: false, tooSlowForSync: false, syncStops: 0 }
  return { slot: slot as unknown as IsolateSlot, settle: (err) => settle(err), disposed: () => isolate.isDisposed, connected: () => connected }
}

const link: BridgeLink = { post: () => undefined, listen: () => undefined, close: () => undefined }

t.test('the deadline answers reactor_timeout at once, without waiting for the disposed isolate\'s call', async (t) => {
  const { slot, settle, disposed, connected } = stuckSlot()
  let guardTimer: NodeJS.Timeout | undefined
  const guard = new Promise((resolve) => (guardTimer = setTimeout(() => resolve('still waiting for the isolate'), 5000)))
  const outcome = await Promise.race([runInvocation(slot, '{}', 50, link, limits), guard])
  clearTimeout(guardTimer)
  t.same(outcome, { kind: 'error', code: 'reactor_timeout', detail: 'The Reactor did not finish within 50 ms.' })
  t.ok(disposed(), 'the isolate is disposed')
  t.notOk(connected(), 'its bridge calls are refused from now on')
  // The call settles later (isolated-vm: disposed during execution): nothing is left to answer.
  settle(new Error('Isolate was disposed during execution'))
  await new Promise((resolve) => setImmediate(resolve))
})
