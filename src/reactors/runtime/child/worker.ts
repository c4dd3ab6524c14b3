/**
 * Worker thread of the runtime child: owns this thread's isolates and serves its lane, the
 * socket to the API process inherited by the child process (fd LANE_FD_BASE + lane). Calls are
 * async end to end (isolate code runs on isolated-vm's own threads), so one worker serves many
 * invocations at once, and a Reactor spinning until its deadline holds no one else's call.
 */
import { Socket } from 'node:net'
import { workerData } from 'node:worker_threads'
import { checkSyntax } from './check-syntax.js'
import { describeCompileError } from './compile-error.js'
import { FrameReader, encodeFrame, writeCoalesced } from '../shared/frames.js'
import { runInvocation } from './invocation.js'
import { IsolateCache, type IsolateSlot } from './isolate-cache.js'
import { splitOutcome, type LaneReply, type LaneRequest, type WireOutcome, type WorkerData } from '../shared/protocol.js'
import type { BridgeLink } from './sandbox-context.js'
import { ISOLATE_THREAD_NICE, lowerThreadPriority } from './thread-priority.js'

const { limits, laneFd } = workerData as WorkerData

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

const cache = new IsolateCache(limits, onCatastrophe)
/** Bridge answers for running invocations, by invocation id; an ended one has no entry. */
const answers = new Map<number, (callId: number, ok: boolean, json: string) => void>()

const lane = new Socket({ fd: laneFd, readable: true, writable: true })
const send = (reply: LaneReply, body?: string): void => writeCoalesced(lane, encodeFrame(reply, body))
// Frames from the API process are at most an input or a bridge answer, plus a header.
const reader = new FrameReader((header, body) => handle(header as LaneRequest, body), limits.payloadMaxBytes + 64 * 1024)
lane.on('data', (chunk: Buffer) => reader.push(chunk))
// The API process is gone (or the lane broke): the child's main thread ends the process.
lane.on('close', () => process.exit(1))

function handle(request: LaneRequest, body: string): void {
  switch (request.t) {
    case 'invoke':
      void invoke(request, body)
      return
    case 'drop':
      cache.drop(request.slots)
      return
    case 'compile':
      void checkSyntax(body, limits.memoryMb).then(
        (error) => send({ t: 'compiled', id: request.id, error }),
        () => send({ t: 'compiled', id: request.id, error: 'The Reactor runtime could not check the code.' }),
      )
      return
    case 'bridge-result':
      answers.get(request.id)?.(request.callId, request.ok, body)
      return
  }
}

function linkFor(id: number): BridgeLink {
  return {
    post: (call) => send({ t: 'bridge', id, callId: call.callId, op: call.op }, call.json),
    listen: (onAnswer) => void answers.set(id, onAnswer),
    close: () => void answers.delete(id),
  }
}

async function invoke(request: Extract<LaneRequest, { t: 'invoke' }>, input: string): Promise<void> {
  const { id } = request
  let slot: IsolateSlot | undefined
  try {
    slot = await cache.acquire(request.slot, request.keep, request.fresh)
  } catch (err) {
    return done(id, false, { kind: 'error', code: 'reactor_error', detail: `The Reactor code does not compile: ${describeCompileError(err, request.fresh?.code ?? '')}` })
  }
  if (slot === undefined) return done(id, false, { kind: 'error', code: 'reactor_error', detail: 'The Reactor runtime lost the isolate of this call.' })
  const stopsBefore = slot.syncStops
  const outcome = await runInvocation(slot, input, request.ms, linkFor(id), limits).catch(
    (): WireOutcome => ({ kind: 'error', code: 'reactor_error', detail: 'The Reactor runtime failed during the call.' }),
  )
  // Released before answering: the answer says whether the isolate stays warm.
  done(id, cache.release(slot), outcome, slot.syncStops > stopsBefore)
}

function done(id: number, kept: boolean, outcome: WireOutcome, overran = false): void {
  const [head, body] = splitOutcome(outcome)
  const reply: LaneReply = { t: 'done', id, kept, outcome: head }
  if (overran) reply.overran = true
  send(reply, body)
}

send({ t: 'ready' })
