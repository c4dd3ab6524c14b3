import { fork, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import type { Logger } from 'pino'
import type { Config } from '../config/index.js'
import { AppError, ValidationError } from '../errors/index.js'
import { bridgeErrorMessage, dispatchBridge, type HostBridges } from './runtime/bridge-dispatch.js'
import { runtimeLaunchSpec } from './runtime/launch.js'
import { toOutcome, type ReactorOutcome } from './runtime/outcome.js'
import type { BridgeCall, ChildMessage, ParentMessage } from './runtime/protocol.js'

export type { BridgeFetchRequest, BridgeFetchResponse, HostBridges } from './runtime/bridge-dispatch.js'

export interface ReactorInvocation {
  reactorId: string
  /** Changes whenever the code changes; a new version retires the old warm isolates. */
  version: string
  code: string
  args: unknown
  configuration: Record<string, string>
  /** Opaque to the runtime; handed back to every HostBridges call of this invocation. */
  context: unknown
}

export type { ReactorOutcome } from './runtime/outcome.js'

export interface ReactorStats {
  coldStarts: number
  warmStarts: number
  restarts: number
}

export interface ReactorSupervisorOptions {
  config: Config['reactors']
  logger: Logger
  bridges: HostBridges
}

/** Past the child's own watchdog (deadline + 1 s), silence means the child process is stuck. */
const PARENT_GRACE_MS = 2000
const START_TIMEOUT_MS = 15_000
/** A child that dies this soon after starting counts as a crash loop (see abandon). */
const CRASH_LOOP_MS = 1000
const MAX_RESPAWN_DELAY_MS = 30_000

type Reply = Extract<ChildMessage, { type: 'invoked' | 'compiled' }>

interface Pending {
  child: ChildProcess
  resolve(reply: Reply): void
  reject(err: AppError): void
  timer: NodeJS.Timeout
  deadlineAt: number
  /** Set for invocations: bridges need the context, stats and logs the id. */
  invocation: Pick<ReactorInvocation, 'reactorId' | 'version' | 'context'> | undefined
}

/**
 * Owns the Reactor runtime child process: the only way the API process runs Reactor code.
 * It never loads isolated-vm; a crash or out-of-memory in the child costs the calls in flight
 * there (500, or 504 past their deadline) and the child is started again.
 */
export class ReactorSupervisor {
  private readonly config: Config['reactors']
  private readonly logger: Logger
  private readonly bridges: HostBridges
  private readonly pending = new Map<number, Pending>()
  private readonly counters: ReactorStats = { coldStarts: 0, warmStarts: 0, restarts: 0 }
  private child: ChildProcess | undefined
  private ready: Promise<ChildProcess> | undefined
  private onReady: (() => void) | undefined
  private respawnTimer: NodeJS.Timeout | undefined
  private closing: Promise<void> | undefined
  private startedAt = 0
  private quickCrashes = 0
  private nextId = 0

  constructor(opts: ReactorSupervisorOptions) {
    this.config = opts.config
    this.logger = opts.logger
    this.bridges = opts.bridges
  }

  async start(): Promise<void> {
    await this.ensureChild()
  }

  /** Syntax check only; throws AppError 'reactor_compile' (422) with the compiler's position. */
  async compile(code: string): Promise<void> {
    if (code.length > this.config.codeMaxChars) throw ValidationError.field('code', `must be at most ${this.config.codeMaxChars} characters`)
    const child = await this.ensureChild()
    const id = ++this.nextId
    const reply = await this.call(child, { type: 'compile', id, code }, undefined)
    if (reply.type === 'compiled' && reply.error !== undefined) {
      throw new AppError('reactor_compile', { detail: reply.error, errors: { code: [reply.error] } })
    }
  }

  async invoke(req: ReactorInvocation): Promise<ReactorOutcome> {
    const input = this.encodeInput(req)
    const child = await this.ensureChild()
    const id = ++this.nextId
    const message: ParentMessage = { type: 'invoke', id, reactorId: req.reactorId, version: req.version, code: req.code, input }
    const reply = await this.call(child, message, { reactorId: req.reactorId, version: req.version, context: req.context })
    if (reply.type !== 'invoked') throw new AppError('reactor_error', { detail: 'The Reactor runtime answered out of turn.' })
    this.count(req, reply.start)
    return toOutcome(reply.outcome)
  }

  /** The Reactor was deleted (new code needs no call: a new version retires the old isolates). */
  retire(reactorId: string): void {
    if (this.child !== undefined) this.send(this.child, { type: 'retire', reactorId })
  }

  /** The runtime child's pid while one runs (for health checks and tests). */
  get pid(): number | undefined {
    return this.child?.pid
  }

  stats(): ReactorStats {
    return { ...this.counters }
  }

  /** Kills the child; calls in flight fail. Idempotent. */
  close(): Promise<void> {
    this.closing ??= this.shutdown()
    return this.closing
  }

  private encodeInput(req: ReactorInvocation): string {
    let input: string
    try {
      input = JSON.stringify({ args: req.args ?? null, configuration: req.configuration })
    } catch {
      throw new AppError('bad_request', { detail: 'The Reactor arguments are not serializable as JSON.' })
    }
    if (Buffer.byteLength(input) > this.config.payloadMaxBytes) {
      throw new AppError('payload_too_large', { detail: `The Reactor payload is larger than the ${this.config.payloadMaxBytes}-byte limit.` })
    }
    return input
  }

  private count(req: ReactorInvocation, start: 'warm' | 'cold' | undefined): void {
    if (start === 'warm') this.counters.warmStarts++
    if (start !== 'cold') return
    this.counters.coldStarts++
    this.logger.debug({ reactorId: req.reactorId, version: req.version, coldStarts: this.counters.coldStarts }, 'reactor cold start')
  }

  private call(child: ChildProcess, message: ParentMessage & { id: number }, invocation: Pending['invocation']): Promise<Reply> {
    const { id } = message
    return new Promise<Reply>((resolve, reject) => {
      const timer = setTimeout(() => this.onStuck(id), this.config.timeoutMs + PARENT_GRACE_MS)
      this.pending.set(id, { child, resolve, reject, timer, deadlineAt: Date.now() + this.config.timeoutMs, invocation })
      this.send(child, message)
    })
  }

  /** The child missed its own watchdog: it is wedged, so it goes (and comes back). */
  private onStuck(id: number): void {
    const pending = this.pending.get(id)
    if (pending === undefined) return
    this.settle(id, undefined, timeoutError(this.config.timeoutMs))
    this.logger.error({ pid: pending.child.pid }, 'reactor runtime missed a deadline; restarting it')
    this.abandon(pending.child)
    pending.child.kill('SIGKILL')
  }

  private settle(id: number, reply: Reply | undefined, err?: AppError): void {
    const pending = this.pending.get(id)
    if (pending === undefined) return
    this.pending.delete(id)
    clearTimeout(pending.timer)
    if (reply !== undefined) pending.resolve(reply)
    else pending.reject(err ?? new AppError('reactor_error'))
  }

  private onMessage(child: ChildProcess, message: ChildMessage): void {
    switch (message.type) {
      case 'ready':
        if (child === this.child) this.onReady?.()
        return
      case 'invoked':
      case 'compiled':
        return this.settle(message.id, message)
      case 'bridge':
        return this.onBridge(child, message)
      case 'log':
        this.logger[message.level](message.data, message.msg)
        return
    }
  }

  private onBridge(child: ChildProcess, call: BridgeCall): void {
    const answer = (ok: boolean, json: string): void => this.send(child, { type: 'bridge-result', id: call.id, callId: call.callId, ok, json })
    const invocation = this.pending.get(call.id)?.invocation
    if (invocation === undefined) return answer(false, 'The invocation has ended.')
    dispatchBridge(this.bridges, call.op, invocation.context, call.json).then(
      (json) => answer(true, json),
      (err: unknown) => {
        if (!(err instanceof AppError)) this.logger.warn({ err, reactorId: invocation.reactorId, op: call.op }, 'reactor bridge call failed')
        answer(false, bridgeErrorMessage(err))
      },
    )
  }

  private ensureChild(): Promise<ChildProcess> {
    if (this.closing !== undefined) return Promise.reject(new AppError('unavailable', { detail: 'The Reactor runtime is shut down.' }))
    this.ready ??= this.spawn()
    return this.ready
  }

  private spawn(): Promise<ChildProcess> {
    const { modulePath, execArgv } = runtimeLaunchSpec()
    const child = fork(modulePath, [], { execArgv, serialization: 'advanced', stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
    this.startedAt = Date.now()
    this.child = child
    child.on('message', (message) => this.onMessage(child, message as ChildMessage))
    const ready = new Promise<ChildProcess>((resolve, reject) => {
      const timer = setTimeout(() => child.kill('SIGKILL'), START_TIMEOUT_MS)
      const gone = (code: number | null, signal: NodeJS.Signals | null): void => {
        clearTimeout(timer)
        reject(new AppError('unavailable', { detail: 'The Reactor runtime could not start.' }))
        this.onExit(child, code, signal)
      }
      this.onReady = () => {
        clearTimeout(timer)
        this.quickCrashes = 0
        resolve(child)
      }
      child.once('exit', gone)
      // A process that failed to spawn never emits 'exit'.
      child.on('error', (err) => {
        this.logger.error({ err }, 'reactor runtime process error')
        if (child.pid === undefined) gone(null, null)
      })
    })
    // Callers see the rejection; this only keeps an unobserved one from crashing the process.
    ready.catch(() => undefined)
    this.send(child, { type: 'init', limits: limitsOf(this.config) })
    return ready
  }

  private onExit(child: ChildProcess, code: number | null, signal: NodeJS.Signals | null): void {
    const now = Date.now()
    for (const [id, pending] of this.pending) {
      if (pending.child !== child) continue
      this.settle(id, undefined, now >= pending.deadlineAt ? timeoutError(this.config.timeoutMs) : crashError())
    }
    if (child === this.child && this.closing === undefined) this.logger.warn({ code, signal }, 'reactor runtime exited; restarting it')
    this.abandon(child)
  }

  /** Stops routing calls to `child` at once (before it has even exited) and starts a new one. */
  private abandon(child: ChildProcess): void {
    if (child !== this.child) return
    this.child = undefined
    this.ready = undefined
    this.onReady = undefined
    if (this.closing !== undefined) return
    this.counters.restarts++
    // Dying young again and again (a broken install, a Reactor that kills the process on
    // sight) backs off exponentially instead of spinning.
    if (Date.now() - this.startedAt < CRASH_LOOP_MS) this.quickCrashes++
    const delay = this.quickCrashes === 0 ? 0 : Math.min(MAX_RESPAWN_DELAY_MS, CRASH_LOOP_MS * 2 ** (this.quickCrashes - 1))
    this.respawnTimer = setTimeout(() => {
      this.respawnTimer = undefined
      this.ensureChild().catch((err: unknown) => this.logger.error({ err }, 'reactor runtime restart failed'))
    }, delay)
  }

  private send(child: ChildProcess, message: ParentMessage): void {
    if (!child.connected) return
    // A failed send means the child is going away; its 'exit' handler fails the calls.
    child.send(message, (err) => {
      if (err) this.logger.debug({ err }, 'reactor runtime message not delivered')
    })
  }

  private async shutdown(): Promise<void> {
    clearTimeout(this.respawnTimer)
    const child = this.child
    for (const id of [...this.pending.keys()]) this.settle(id, undefined, new AppError('unavailable', { detail: 'The Reactor runtime is shut down.' }))
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return
    const exited = once(child, 'exit')
    child.kill('SIGKILL')
    await exited
  }
}

function limitsOf(config: Config['reactors']) {
  const { timeoutMs, memoryMb, hotConcurrency, payloadMaxBytes, workers } = config
  return { timeoutMs, memoryMb, hotConcurrency, payloadMaxBytes, workers }
}

function timeoutError(timeoutMs: number): AppError {
  return new AppError('reactor_timeout', { detail: `The Reactor did not finish within ${timeoutMs} ms.` })
}

function crashError(): AppError {
  return new AppError('reactor_error', { detail: 'The Reactor runtime stopped during the call (a Reactor may have exhausted its memory).' })
}
