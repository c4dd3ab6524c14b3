import { fork, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import type { Socket } from 'node:net'
import type { Logger } from 'pino'
import type { Config } from '../config/index.js'
import { AppError, ValidationError } from '../errors/index.js'
import type { HostBridges } from './runtime/host/bridge-dispatch.js'
import { RuntimeConnection } from './runtime/host/connection.js'
import { runtimeLaunchSpec } from './runtime/host/launch.js'
import { toOutcome, type ReactorOutcome } from './runtime/host/outcome.js'
import { LANE_FD_BASE, replyFrameMaxBytes, type ChildMessage, type ParentMessage, type RuntimeLimits, type StartKind } from './runtime/shared/protocol.js'
import { Admission, type AdmissionStats } from './scheduling/admission.js'
import { WarmPool } from './scheduling/warm-pool.js'

export type { BridgeFetchRequest, BridgeFetchResponse, HostBridges } from './runtime/host/bridge-dispatch.js'

export interface ReactorInvocation {
  /** Whose call it is: the fairness caps count per tenant. */
  tenantId: string
  reactorId: string
  /** Changes whenever the code changes; a new version retires the old warm isolates. */
  version: string
  code: string
  args: unknown
  configuration: Record<string, string>
  /** Opaque to the runtime; handed back to every HostBridges call of this invocation. */
  context: unknown
}

export type { ReactorOutcome } from './runtime/host/outcome.js'

export interface ReactorStats {
  coldStarts: number
  warmStarts: number
  restarts: number
  /** Calls that ran synchronously past the budget and started again (child/invocation.ts). */
  syncOverruns: number
}

/** Invocations by outcome: ok (an answer), error, timeout, rejected (no slot in time, or shutting down). */
export type ReactorOutcomeCounts = Record<'ok' | 'error' | 'timeout' | 'rejected', number>

/** What the runtime holds right now (see `load()`). */
export interface ReactorLoad extends AdmissionStats {
  /** Warm isolates kept, in all. */
  warm: number
}

export interface ReactorSupervisorOptions {
  config: Config['reactors']
  logger: Logger
  bridges: HostBridges
  /** The clock of the warm pool's idle window (tests move it; `sweep()` applies it). */
  now?: () => number
}

const START_TIMEOUT_MS = 15_000
/** A child that dies this soon after starting counts as a crash loop (see abandon). */
const CRASH_LOOP_MS = 1000
const MAX_RESPAWN_DELAY_MS = 30_000

/** One runtime child process and the calls to it. */
interface Runtime {
  child: ChildProcess
  connection: RuntimeConnection
  pool: WarmPool
}

/**
 * Owns the Reactor runtime child process: the only way the API process runs Reactor code.
 * It never loads isolated-vm; a crash or out-of-memory in the child costs the calls in flight
 * there (500, or 504 past their deadline) and the child is started again. Admission (caps and a
 * bounded queue) happens here, before a call reaches the runtime, and outlives restarts.
 */
export class ReactorSupervisor {
  private readonly config: Config['reactors']
  private readonly logger: Logger
  private readonly bridges: HostBridges
  private readonly now: () => number
  private readonly admission: Admission
  private readonly counters: ReactorStats = { coldStarts: 0, warmStarts: 0, restarts: 0, syncOverruns: 0 }
  private readonly outcomes: ReactorOutcomeCounts = { ok: 0, error: 0, timeout: 0, rejected: 0 }
  private readonly sweeper: NodeJS.Timeout
  /** The child process calls go to (from its spawn on; `ready` says when it can take them). */
  private runtime: Runtime | undefined
  private ready: Promise<Runtime> | undefined
  private respawnTimer: NodeJS.Timeout | undefined
  private closing: Promise<void> | undefined
  private startedAt = 0
  private quickCrashes = 0

  constructor(opts: ReactorSupervisorOptions) {
    this.config = opts.config
    this.logger = opts.logger
    this.bridges = opts.bridges
    this.now = opts.now ?? Date.now
    this.admission = new Admission(opts.config, Math.max(1, Math.ceil(opts.config.queue.timeoutMs / 1000)))
    // Extras beyond hot concurrency go within about a quarter of the idle window after it ends.
    this.sweeper = setInterval(() => this.sweep(), Math.max(1000, opts.config.warm.idleMs / 4))
    this.sweeper.unref()
  }

  async start(): Promise<void> {
    await this.ensureRuntime()
  }

  /** Syntax check only; throws AppError 'reactor_compile' (422) with the compiler's position. */
  async compile(code: string): Promise<void> {
    if (code.length > this.config.codeMaxChars) throw ValidationError.field('code', `must be at most ${this.config.codeMaxChars} characters`)
    const { connection } = await this.ensureRuntime()
    const error = await connection.compile(code)
    if (error !== undefined) throw new AppError('reactor_compile', { detail: error, errors: { code: [error] } })
  }

  /**
   * Runs one call and answers within the deadline: the call waits for a slot at most the queue
   * time-out (capped at half the deadline, so it keeps most of its time to run), else 503, and
   * the time it waited counts against its deadline. (Waiting for a runtime that is restarting
   * does not: that wait is bounded by the start time-out, and the call gets its full time.)
   */
  async invoke(req: ReactorInvocation): Promise<ReactorOutcome> {
    try {
      const outcome = await this.run(req)
      this.outcomes.ok++
      return outcome
    } catch (err) {
      this.outcomes[outcomeOf(err)]++
      throw err
    }
  }

  private async run(req: ReactorInvocation): Promise<ReactorOutcome> {
    const input = this.encodeInput(req)
    const queuedAt = Date.now()
    const { timeoutMs } = this.config
    const release = await this.admission.admit(req, Math.min(this.config.queue.timeoutMs, timeoutMs / 2))
    try {
      const ms = timeoutMs - (Date.now() - queuedAt)
      const { connection } = await this.ensureRuntime()
      const { start, overran, outcome } = await connection.run(req, input, ms)
      this.count(req, start)
      if (overran) this.counters.syncOverruns++
      return toOutcome(outcome)
    } finally {
      release()
    }
  }

  /** The Reactor was deleted (new code needs no call: a new version retires the old isolates). */
  retire(reactorId: string): void {
    this.runtime?.connection.retire(reactorId)
  }

  /** Lets warm isolates beyond hot concurrency that were idle for the idle window go (also runs on a timer). */
  sweep(): void {
    this.runtime?.connection.sweep()
  }

  /** The runtime child's pid while one runs (for health checks and tests). */
  get pid(): number | undefined {
    return this.runtime?.child.pid
  }

  stats(): ReactorStats {
    return { ...this.counters }
  }

  outcomeCounts(): ReactorOutcomeCounts {
    return { ...this.outcomes }
  }

  load(): ReactorLoad {
    return { ...this.admission.stats(), warm: this.runtime?.pool.stats().warm ?? 0 }
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

  private count(req: ReactorInvocation, start: StartKind): void {
    if (start === 'warm') {
      this.counters.warmStarts++
      return
    }
    this.counters.coldStarts++
    this.logger.debug({ reactorId: req.reactorId, version: req.version, coldStarts: this.counters.coldStarts }, 'reactor cold start')
  }

  /** The running runtime, or one starting. */
  private ensureRuntime(): Promise<Runtime> {
    if (this.closing !== undefined) return Promise.reject(new AppError('unavailable', { detail: 'The Reactor runtime is shut down.' }))
    this.ready ??= this.spawn()
    return this.ready
  }

  private spawn(): Promise<Runtime> {
    const { modulePath, execArgv } = runtimeLaunchSpec()
    // One socket pair per worker thread (its lane), after stdin/stdout/stderr and IPC.
    const lanes = Array.from({ length: this.config.workers }, () => 'pipe' as const)
    // The child gets an allow-listed environment, never the API process's secrets (config/runtime-env.ts).
    const child = fork(modulePath, [], { execArgv, env: { ...this.config.childEnv }, serialization: 'advanced', stdio: ['ignore', 'inherit', 'inherit', 'ipc', ...lanes] })
    this.startedAt = Date.now()
    child.on('message', (message: ChildMessage) => this.logger[message.level]({ ...message.data, err: message.err }, message.msg))
    const ready = new Promise<Runtime>((resolve, reject) => {
      const timer = setTimeout(() => child.kill('SIGKILL'), START_TIMEOUT_MS)
      const gone = (code: number | null, signal: NodeJS.Signals | null): void => {
        clearTimeout(timer)
        reject(new AppError('unavailable', { detail: 'The Reactor runtime could not start.' }))
        this.onExit(child, code, signal)
      }
      const pool = this.newPool(lanes.length)
      const runtime: Runtime = {
        child,
        pool,
        connection: this.connect(child, pool, () => {
          clearTimeout(timer)
          this.quickCrashes = 0
          resolve(runtime)
        }),
      }
      this.runtime = runtime
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

  private newPool(lanes: number): WarmPool {
    const { warm, hotConcurrency } = this.config
    return new WarmPool({ hotConcurrency, perReactor: warm.perReactor, total: warm.total, idleMs: warm.idleMs }, lanes, this.now)
  }

  private connect(child: ChildProcess, pool: WarmPool, onReady: () => void): RuntimeConnection {
    return new RuntimeConnection({
      lanes: Array.from({ length: this.config.workers }, (_, i) => child.stdio[LANE_FD_BASE + i] as Socket),
      pool,
      bridges: this.bridges,
      logger: this.logger,
      maxFrameBytes: replyFrameMaxBytes(this.config.payloadMaxBytes),
      payloadMaxBytes: this.config.payloadMaxBytes,
      bridgeLimits: this.config.bridges,
      onReady,
      onStuck: (reason) => {
        this.logger.error({ pid: child.pid, reason }, 'reactor runtime is stuck; restarting it')
        // The call that missed its deadline gets 504 (it is late); the others in flight, 500.
        this.fail(child, crashError())
        child.kill('SIGKILL')
      },
    })
  }

  private onExit(child: ChildProcess, code: number | null, signal: NodeJS.Signals | null): void {
    this.fail(child, crashError())
    if (child === this.runtime?.child && this.closing === undefined) this.logger.warn({ code, signal }, 'reactor runtime exited; restarting it')
    this.abandon(child)
  }

  /** Fails the calls in flight in `child` (504 for those past their deadline) and stops routing to it. */
  private fail(child: ChildProcess, err: AppError): void {
    const runtime = this.runtime?.child === child ? this.runtime : undefined
    runtime?.connection.fail((late) => (late ? timeoutError(this.config.timeoutMs) : err))
    this.abandon(child)
  }

  /** Stops routing calls to `child` at once (before it has even exited) and starts a new one. */
  private abandon(child: ChildProcess): void {
    if (child !== this.runtime?.child) return
    this.runtime = undefined
    this.ready = undefined
    if (this.closing !== undefined) return
    this.counters.restarts++
    // Dying young again and again (a broken install, a Reactor that kills the process on
    // sight) backs off exponentially instead of spinning.
    if (Date.now() - this.startedAt < CRASH_LOOP_MS) this.quickCrashes++
    const delay = this.quickCrashes === 0 ? 0 : Math.min(MAX_RESPAWN_DELAY_MS, CRASH_LOOP_MS * 2 ** (this.quickCrashes - 1))
    this.respawnTimer = setTimeout(() => {
      this.respawnTimer = undefined
      this.ensureRuntime().catch((err: unknown) => this.logger.error({ err }, 'reactor runtime restart failed'))
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
    clearInterval(this.sweeper)
    const runtime = this.runtime
    runtime?.connection.fail(() => new AppError('unavailable', { detail: 'The Reactor runtime is shut down.' }))
    const child = runtime?.child
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return
    const exited = once(child, 'exit')
    child.kill('SIGKILL')
    await exited
  }
}

function limitsOf(config: Config['reactors']): RuntimeLimits {
  const { timeoutMs, memoryMb, payloadMaxBytes, workers, codeMaxChars } = config
  return { timeoutMs, memoryMb, payloadMaxBytes, bridgeConcurrency: config.bridges.concurrency, workers, codeMaxChars }
}

function timeoutError(timeoutMs: number): AppError {
  return new AppError('reactor_timeout', { detail: `The Reactor did not finish within ${timeoutMs} ms.` })
}

function crashError(): AppError {
  return new AppError('reactor_error', { detail: 'The Reactor runtime stopped during the call (a Reactor may have exhausted its memory).' })
}

/** The outcome label of a failed invocation. */
function outcomeOf(err: unknown): keyof ReactorOutcomeCounts {
  const code = err instanceof AppError ? err.code : undefined
  if (code === 'reactor_timeout') return 'timeout'
  if (code === 'reactor_overloaded' || code === 'unavailable') return 'rejected'
  return 'error'
}
