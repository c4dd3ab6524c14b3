/**
 * Entry of the Reactor runtime child process (forked by ReactorSupervisor with
 * --no-node-snapshot, which piscina's worker threads inherit). It owns the piscina pool and
 * relays bridge calls between the workers' bridge ports and the API process. It never reads the
 * environment or touches stores: all it knows arrives in `init`.
 */
import { extname } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { MessagePort } from 'node:worker_threads'
import { ReactorPool } from './pool.js'
import type { BridgePortMessage, ChildMessage, CompileReply, InvokeReply, ParentMessage, PortBridgeCall, PortBridgeResult, RuntimeLimits, WireOutcome } from './protocol.js'

/**
 * A worker answers by its deadline on its own (it disposes the isolate). Still silent this long
 * after, the worker thread itself is stuck: answer for it and terminate the thread.
 */
const WATCHDOG_SLACK_MS = 1000

interface InFlight {
  /** The bridge port of the worker running the call, once it made a bridge call. */
  port: MessagePort | undefined
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
      case 'bridge-result': {
        // An invocation that has ended has nobody left to answer (its worker drops it too).
        const answer: PortBridgeResult = { id: message.id, callId: message.callId, ok: message.ok, json: message.json }
        this.inflight.get(message.id)?.port?.postMessage(answer)
        return
      }
    }
  }

  private init(limits: RuntimeLimits): void {
    this.limits = limits
    this.pool = new ReactorPool(limits, new URL(`./worker${extname(fileURLToPath(import.meta.url))}`, import.meta.url), (m) => this.onBridgePort(m))
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
    const deadlineAt = Date.now() + limits.timeoutMs
    const entry: InFlight = {
      port: undefined,
      threadId: undefined,
      watchdog: setTimeout(() => this.onWatchdog(id), limits.timeoutMs + WATCHDOG_SLACK_MS),
    }
    this.inflight.set(id, entry)
    const task = { op: 'invoke' as const, id, reactorId, version: message.version, code: message.code, input: message.input, deadlineAt }
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
    this.send({ type: 'invoked', id, start, outcome })
  }

  /** A worker thread started: its bridge calls arrive on this port, for as long as it lives. */
  private onBridgePort({ threadId, port }: BridgePortMessage): void {
    port.on('message', (call: PortBridgeCall) => {
      const entry = this.inflight.get(call.id)
      // Only the worker running the invocation may call for it, and only while it runs.
      if (entry === undefined || entry.threadId !== threadId) {
        const answer: PortBridgeResult = { id: call.id, callId: call.callId, ok: false, json: 'The invocation has ended.' }
        port.postMessage(answer)
        return
      }
      entry.port = port
      this.send({ type: 'bridge', id: call.id, callId: call.callId, op: call.op, json: call.json })
    })
    // The port must not keep this process alive: the IPC channel does, as long as it should.
    port.unref()
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
