/**
 * Runs in the API process: the calls to one runtime child process, over its lanes (one socket
 * per worker thread, protocol.ts). It places each call on an isolate through the WarmPool ledger,
 * relays the Reactor's bridge calls to HostBridges, and bounds every wait: a lane silent past a
 * call's deadline plus a grace means the runtime is stuck, and `onStuck` has it killed.
 */
import type { Socket } from 'node:net'
import type { Logger } from 'pino'
import { AppError } from '../../../errors/index.js'
import type { Slot, WarmPool } from '../../scheduling/warm-pool.js'
import { BridgeBudget, type BridgeLimits } from './bridge-budget.js'
import { bridgeErrorMessage, dispatchBridge, type HostBridges } from './bridge-dispatch.js'
import { encodeFrame, FrameReader, writeCoalesced } from '../shared/frames.js'
import { joinOutcome, type LaneReply, type LaneRequest, type StartKind, type WireOutcome } from '../shared/protocol.js'

/** Past its deadline, a lane silent this long belongs to a stuck runtime (the worker's own timer fires at the deadline). */
export const LANE_GRACE_MS = 1000
/** A compile check has no deadline of its own; it gets this long. */
const COMPILE_TIMEOUT_MS = 10_000

export interface RunRequest {
  reactorId: string
  version: string
  code: string
  /** Opaque; handed to every HostBridges call of this invocation. */
  context: unknown
}

export interface RunResult {
  start: StartKind
  /** The call ran synchronously past the budget and started again (see child/invocation.ts). */
  overran: boolean
  outcome: WireOutcome
}

/** A `done` or `compiled` reply, the run's value joined back into its outcome. */
type Settled = { t: 'done'; id: number; kept: boolean; overran: boolean; outcome: WireOutcome } | Extract<LaneReply, { t: 'compiled' }>

interface Pending {
  lane: number
  timer: NodeJS.Timeout
  deadlineAt: number
  /** Set for invocations: bridges need the context, logs the Reactor id. */
  call: RunRequest | undefined
  /** An invocation's bridge calls: bounded while it runs, aborted when it ends. */
  budget: BridgeBudget | undefined
  resolve(reply: Settled): void
  reject(err: AppError): void
}

export interface ConnectionOptions {
  lanes: Socket[]
  pool: WarmPool
  bridges: HostBridges
  logger: Logger
  /** Largest frame a worker may send: a result or a bridge argument, plus a header. */
  maxFrameBytes: number
  /** Largest bridge answer sent to a worker (it takes frames of this plus a header). */
  payloadMaxBytes: number
  /** What the bridge calls of one invocation may take of this process. */
  bridgeLimits: BridgeLimits
  onReady(): void
  /** The runtime missed a deadline by LANE_GRACE_MS, or a lane broke: it must go. */
  onStuck(reason: string): void
}

export class RuntimeConnection {
  private readonly pending = new Map<number, Pending>()
  private readonly lanes: Socket[]
  private notReady: number
  /** Set once the runtime is gone: later calls fail at once instead of writing to a dead lane. */
  private failure: ((deadlinePassed: boolean) => AppError) | undefined
  private nextId = 0
  private nextCompileLane = 0

  constructor(private readonly opts: ConnectionOptions) {
    this.lanes = opts.lanes
    this.notReady = opts.lanes.length
    this.lanes.forEach((socket, lane) => this.listen(socket, lane))
  }

  /** Runs one call within `ms`; rejects only when the runtime fails (then `fail` settles it). */
  run(req: RunRequest, input: string, ms: number): Promise<RunResult> {
    if (this.failure !== undefined) return Promise.reject(this.failure(false))
    const { slot, fresh, drops } = this.opts.pool.checkout(req.reactorId, req.version)
    this.drop(drops)
    const id = ++this.nextId
    const frame: LaneRequest = { t: 'invoke', id, slot: slot.id, ms, keep: slot.kept }
    // The code travels in the body as is, before the input (see requestFrameMaxBytes).
    if (fresh) frame.fresh = { reactorId: req.reactorId, version: req.version, codeChars: req.code.length }
    return new Promise<RunResult>((resolve, reject) => {
      const settle = (reply: Settled): void => {
        const retired = this.opts.pool.checkin(slot, reply.t === 'done' && reply.kept)
        if (retired !== undefined) this.drop([retired])
        if (reply.t !== 'done') return reject(new AppError('reactor_error', { detail: 'The Reactor runtime answered out of turn.' }))
        resolve({ start: fresh ? 'cold' : 'warm', overran: reply.overran, outcome: reply.outcome })
      }
      this.track(id, slot.lane, ms, req, settle, reject)
      this.write(slot.lane, frame, fresh ? req.code + input : input)
    })
  }

  /** Syntax check on the next lane in turn; resolves to the compiler's message, if any. */
  compile(code: string): Promise<string | undefined> {
    if (this.failure !== undefined) return Promise.reject(this.failure(false))
    const id = ++this.nextId
    const lane = this.nextCompileLane++ % this.lanes.length
    return new Promise((resolve, reject) => {
      this.track(id, lane, COMPILE_TIMEOUT_MS, undefined, (reply) => resolve(reply.t === 'compiled' ? reply.error : 'The Reactor runtime answered out of turn.'), reject)
      this.write(lane, { t: 'compile', id }, code)
    })
  }

  retire(reactorId: string): void {
    this.drop(this.opts.pool.retire(reactorId))
  }

  sweep(): void {
    this.drop(this.opts.pool.sweep())
  }

  /** The runtime is gone: every call still waiting fails with `errorFor` (by its deadline). */
  fail(errorFor: (deadlinePassed: boolean) => AppError): void {
    this.failure ??= errorFor
    const now = Date.now()
    for (const [id, p] of [...this.pending]) {
      this.pending.delete(id)
      clearTimeout(p.timer)
      p.budget?.end()
      p.reject(errorFor(now >= p.deadlineAt))
    }
  }

  private track(id: number, lane: number, ms: number, call: RunRequest | undefined, resolve: Pending['resolve'], reject: Pending['reject']): void {
    const timer = setTimeout(() => this.opts.onStuck(`lane ${lane} missed a deadline`), ms + LANE_GRACE_MS)
    const budget = call === undefined ? undefined : new BridgeBudget(this.opts.bridgeLimits, this.opts.payloadMaxBytes)
    this.pending.set(id, { lane, timer, deadlineAt: Date.now() + ms, call, budget, resolve, reject })
  }

  private listen(socket: Socket, lane: number): void {
    const reader = new FrameReader((header, body) => this.onFrame(lane, header as LaneReply, body), this.opts.maxFrameBytes)
    socket.on('data', (chunk: Buffer) => {
      try {
        reader.push(chunk)
      } catch (err) {
        this.opts.logger.error({ err, lane }, 'reactor runtime lane sent a malformed frame')
        this.opts.onStuck(`lane ${lane} is corrupt`)
      }
    })
    socket.on('error', (err) => this.opts.logger.debug({ err, lane }, 'reactor runtime lane error'))
  }

  private onFrame(lane: number, reply: LaneReply, body: string): void {
    switch (reply.t) {
      case 'ready':
        if (--this.notReady === 0) this.opts.onReady()
        return
      case 'done':
      case 'compiled':
        return this.settle(lane, reply, body)
      case 'bridge':
        return this.onBridge(lane, reply, body)
    }
  }

  private settle(lane: number, reply: Extract<LaneReply, { t: 'done' | 'compiled' }>, body: string): void {
    const p = this.pending.get(reply.id)
    if (p === undefined || p.lane !== lane) return
    this.pending.delete(reply.id)
    clearTimeout(p.timer)
    p.budget?.end()
    p.resolve(reply.t === 'done' ? { t: 'done', id: reply.id, kept: reply.kept, overran: reply.overran === true, outcome: joinOutcome(reply.outcome, body) } : reply)
  }

  private onBridge(lane: number, call: Extract<LaneReply, { t: 'bridge' }>, json: string): void {
    const answer = (ok: boolean, text: string): void => this.write(lane, { t: 'bridge-result', id: call.id, callId: call.callId, ok }, text)
    const p = this.pending.get(call.id)
    // Only the lane running the invocation may call for it, and only while it runs.
    if (p === undefined || p.lane !== lane || p.call === undefined || p.budget === undefined) return answer(false, 'The invocation has ended.')
    const { context, reactorId } = p.call
    const budget = p.budget
    const refusal = budget.admit()
    if (refusal !== undefined) return answer(false, refusal)
    // An answer to an invocation that has ended has no one to go to (the worker drops it).
    dispatchBridge(this.opts.bridges, call.op, context, json, budget).then(
      (result) => {
        budget.release()
        if (!budget.ended) answer(true, result)
      },
      (err: unknown) => {
        budget.release()
        if (budget.ended) return
        if (!(err instanceof AppError)) this.opts.logger.warn({ err, reactorId, op: call.op }, 'reactor bridge call failed')
        answer(false, bridgeErrorMessage(err))
      },
    )
  }

  private drop(slots: Slot[]): void {
    const byLane = new Map<number, number[]>()
    for (const s of slots) byLane.set(s.lane, [...(byLane.get(s.lane) ?? []), s.id])
    for (const [lane, ids] of byLane) this.write(lane, { t: 'drop', slots: ids })
  }

  private write(lane: number, request: LaneRequest, body?: string): void {
    const socket = this.lanes[lane]
    // A lane that cannot take writes belongs to a runtime going away; its exit fails the calls.
    if (socket === undefined || socket.destroyed) return
    writeCoalesced(socket, encodeFrame(request, body))
  }
}
