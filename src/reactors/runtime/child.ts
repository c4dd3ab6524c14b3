/**
 * Entry of the Reactor runtime child process (forked by ReactorSupervisor with
 * --no-node-snapshot, which piscina's worker threads inherit). It owns the piscina pool and
 * relays bridge calls between the invocation ports and the API process. It never reads the
 * environment or touches stores: all it knows arrives in `init`.
 */
import { extname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { MessageChannel, type MessagePort } from 'node:worker_threads'
import { ReactorPool } from './pool.js'
import type { ChildMessage, CompileReply, InvokeReply, ParentMessage, PortBridgeCall, RuntimeLimits, WireOutcome } from './protocol.js'

/**
 * A worker answers by its deadline on its own (it disposes the isolate). Still silent this long
 * after, the worker thread itself is stuck: answer for it and terminate the thread.
 */
const WATCHDOG_SLACK_MS = 1000

interface InFlight {
  port: MessagePort
  watchdog: NodeJS.Timeout
  threadId: number | undefined
}

class RuntimeChild {
  private pool: ReactorPool | undefined
  private limits: RuntimeLimits | undefined
  private readonly inflight = new Map<number, InFlight>()

  constructor(private readonly send: (message: ChildMessage) => void) {}

  handle(message: ParentMessage): void {
    switch (message.type) {
      case 'init':
        return this.init(message.limits)
      case 'invoke':
        return this.invoke(message)
      case 'compile':
        return this.compile(message.id, message.code)
      case 'retire':
        this.requirePool()
          .retire(message.reactorId)
          .catch((err: unknown) => this.log('warn', 'reactor retire failed', err))
        return
      case 'bridge-result':
        this.inflight.get(message.id)?.port.postMessage({ callId: message.callId, ok: message.ok, json: message.json })
        return
    }
  }

  private init(limits: RuntimeLimits): void {
    this.limits = limits
    this.pool = new ReactorPool(limits, new URL(`./worker${extname(fileURLToPath(import.meta.url))}`, import.meta.url))
    this.pool.warmUp(limits.workers).then(
      () => this.send({ type: 'ready' }),
      (err: unknown) => {
        // Without workers there is no runtime: leave, and the supervisor reports the failure.
        this.log('error', 'reactor runtime workers failed to start', err)
        process.exitCode = 1
        process.disconnect()
      },
    )
  }

  private invoke(message: Extract<ParentMessage, { type: 'invoke' }>): void {
    const limits = this.requireLimits()
    const { id, reactorId } = message
    const { port1, port2 } = new MessageChannel()
    const deadlineAt = Date.now() + limits.timeoutMs
    const entry: InFlight = {
      port: port1,
      threadId: undefined,
      watchdog: setTimeout(() => this.onWatchdog(id), limits.timeoutMs + WATCHDOG_SLACK_MS),
    }
    this.inflight.set(id, entry)
    port1.on('message', (call: PortBridgeCall) => this.send({ type: 'bridge', id, callId: call.callId, op: call.op, json: call.json }))
    const task = { op: 'invoke' as const, reactorId, version: message.version, code: message.code, input: message.input, deadlineAt, port: port2 }
    this.requirePool()
      .run<InvokeReply>(task, reactorId, (threadId) => (entry.threadId = threadId))
      .then(
        (reply) => this.finish(id, reply.start, reply.outcome),
        (err: unknown) => {
          this.log('warn', 'reactor worker failed an invocation', err)
          this.finish(id, undefined, { kind: 'error', code: 'reactor_error', detail: 'The Reactor runtime worker stopped during the call.' })
        },
      )
  }

  private onWatchdog(id: number): void {
    const entry = this.inflight.get(id)
    if (entry === undefined) return
    const timeoutMs = this.requireLimits().timeoutMs
    this.finish(id, undefined, { kind: 'error', code: 'reactor_timeout', detail: `The Reactor did not finish within ${timeoutMs} ms.` })
    // Still queued (never dispatched): the worker will see the past deadline and skip it.
    if (entry.threadId === undefined) return
    this.log('warn', 'reactor worker missed a deadline; terminating it', undefined)
    this.requirePool()
      .terminate(entry.threadId)
      .catch((err: unknown) => this.log('error', 'terminating a reactor worker failed', err))
  }

  private finish(id: number, start: InvokeReply['start'], outcome: WireOutcome): void {
    const entry = this.inflight.get(id)
    if (entry === undefined) return
    this.inflight.delete(id)
    clearTimeout(entry.watchdog)
    entry.port.close()
    this.send({ type: 'invoked', id, start, outcome })
  }

  private compile(id: number, code: string): void {
    this.requirePool()
      .run<CompileReply>({ op: 'compile', code })
      .then(
        (reply) => this.send({ type: 'compiled', id, error: reply.error }),
        (err: unknown) => {
          this.log('warn', 'reactor compile failed in the runtime', err)
          this.send({ type: 'compiled', id, error: 'The Reactor runtime could not check the code.' })
        },
      )
  }

  private log(level: 'warn' | 'error', msg: string, err: unknown): void {
    this.send({ type: 'log', level, msg, data: err === undefined ? {} : { err: err instanceof Error ? err.message : String(err) } })
  }

  private requirePool(): ReactorPool {
    if (this.pool === undefined) throw new Error('reactor runtime used before init')
    return this.pool
  }

  private requireLimits(): RuntimeLimits {
    if (this.limits === undefined) throw new Error('reactor runtime used before init')
    return this.limits
  }
}

function main(): void {
  const send = (message: ChildMessage): void => {
    // Once the API process is gone there is nobody to answer; 'disconnect' ends this process.
    if (process.connected) process.send?.(message)
  }
  const child = new RuntimeChild(send)
  process.on('message', (message) => child.handle(message as ParentMessage))
  // Never outlive the API process: an orphaned runtime would hold isolates forever.
  process.on('disconnect', () => process.exit())
}

main()
