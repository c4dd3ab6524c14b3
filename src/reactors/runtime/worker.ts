/**
 * Piscina worker entry: owns this thread's isolates. Tasks are async end to end (isolate work
 * runs on isolated-vm's own threads), so one worker serves many invocations at once.
 */
import { workerData } from 'node:worker_threads'
import { checkSyntax } from './check-syntax.js'
import { describeCompileError } from './compile-error.js'
import { runInvocation } from './invocation.js'
import { IsolateCache } from './isolate-cache.js'
import type { CompileReply, InvokeReply, InvokeTask, RuntimeLimits, WorkerTask } from './protocol.js'

const limits = workerData as RuntimeLimits

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
    task.port.close()
    return { start: undefined, outcome: { kind: 'error', code: 'reactor_timeout', detail: `The Reactor did not finish within ${limits.timeoutMs} ms.` } }
  }
  let acquired
  try {
    acquired = await cache.acquire(task.reactorId, task.version, task.code)
  } catch (err) {
    task.port.close()
    return { start: 'cold', outcome: { kind: 'error', code: 'reactor_error', detail: `The Reactor code does not compile: ${describeCompileError(err, task.code)}` } }
  }
  try {
    const outcome = await runInvocation(acquired.slot, task.input, task.deadlineAt, task.port, limits)
    return { start: acquired.start, outcome }
  } finally {
    cache.release(task.reactorId, acquired.slot)
  }
}
