/**
 * Piscina worker entry: owns this thread's isolates. Tasks are async end to end (isolate work
 * runs on isolated-vm's own threads), so one worker serves many invocations at once.
 */
import { MessageChannel, parentPort, threadId, workerData } from 'node:worker_threads'
import { checkSyntax } from './check-syntax.js'
import { describeCompileError } from './compile-error.js'
import { runInvocation } from './invocation.js'
import { IsolateCache } from './isolate-cache.js'
import type { BridgePortMessage, CompileReply, InvokeReply, InvokeTask, PortBridgeResult, RuntimeLimits, WorkerTask } from './protocol.js'
import type { BridgeLink } from './sandbox-context.js'
import { ISOLATE_THREAD_NICE, lowerThreadPriority } from './thread-priority.js'

const limits = workerData as RuntimeLimits

// Before any isolate exists, so isolated-vm's threads, started from here, inherit it.
lowerThreadPriority(ISOLATE_THREAD_NICE)

/**
 * V8 has lost control of an isolate: nothing in this process can be trusted any more, so the
 * whole runtime child goes and the supervisor starts a fresh one.
 */
function onCatastrophe(message: string): void {
  process.stderr.write(`reactor runtime: catastrophic isolate error, exiting: ${message}\n`)
  process.kill(process.pid, 'SIGKILL')
}

// One cache per worker thread: the thread is the scope of these isolates, and piscina gives a
// worker module no other place to keep state between tasks.
const cache = new IsolateCache(limits, onCatastrophe)

/**
 * This thread's bridge channel to the child main thread, handed over once at start-up (piscina
 * relays `parentPort` messages as pool 'message' events). Calls carry their invocation id;
 * answers are routed back by it, and only while the invocation runs.
 */
const answers = new Map<number, (answer: PortBridgeResult) => void>()
const bridge = new MessageChannel()
bridge.port1.on('message', (answer: PortBridgeResult) => answers.get(answer.id)?.(answer))
bridge.port1.unref()
parentPort?.postMessage({ type: 'tessera-bridge-port', threadId, port: bridge.port2 } satisfies BridgePortMessage, [bridge.port2])

function linkFor(id: number): BridgeLink {
  return {
    post: (call) => bridge.port1.postMessage({ id, ...call }),
    listen: (onAnswer) => void answers.set(id, onAnswer),
    close: () => void answers.delete(id),
  }
}

export default async function handleTask(task: WorkerTask): Promise<InvokeReply | CompileReply | null> {
  switch (task.op) {
    case 'invoke':
      return invoke(task)
    case 'compile':
      return { error: await checkSyntax(task.code, limits.memoryMb) }
    case 'retire':
      cache.retire(task.reactorId)
      return null
    case 'ping':
      return null
  }
}

async function invoke(task: InvokeTask): Promise<InvokeReply> {
  if (Date.now() >= task.deadlineAt) {
    return { start: undefined, outcome: { kind: 'error', code: 'reactor_timeout', detail: `The Reactor did not finish within ${limits.timeoutMs} ms.` } }
  }
  let acquired
  try {
    acquired = await cache.acquire(task.reactorId, task.version, task.code)
  } catch (err) {
    return { start: 'cold', outcome: { kind: 'error', code: 'reactor_error', detail: `The Reactor code does not compile: ${describeCompileError(err, task.code)}` } }
  }
  const { slot, start } = acquired
  try {
    const outcome = await runInvocation(slot, () => cache.takeContext(slot), task.input, task.deadlineAt, linkFor(task.id), limits)
    return { start, outcome }
  } finally {
    cache.release(task.reactorId, slot)
  }
}
