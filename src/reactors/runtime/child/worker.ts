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
import { REACTOR_MESSAGE_MAX_CHARS } from './decode-run.js'
import { runInvocation } from './invocation.js'
import { IsolateCache, type IsolateSlot } from './isolate-cache.js'
import { replyFrameMaxBytes, requestFrameMaxBytes, splitOutcome, type LaneReply, type LaneRequest, type WireOutcome, type WorkerData } from '../shared/protocol.js'
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
// Frames from the API process are at most an input after a cold start's code, or a bridge
// answer, plus a header. One larger still (limits changed under saved code) fails its own call.
const reader = new FrameReader((header, body) => handle(header as LaneRequest, body), requestFrameMaxBytes(limits), (header) => refuse(header as LaneRequest))
lane.on('data', (chunk: Buffer) => {
  try {
    reader.push(chunk)
  } catch (err) {
    // Framing itself is broken (not merely a large frame): nothing later on this lane can be
    // read, so the runtime goes and the supervisor starts a fresh one.
    process.stderr.write(`reactor runtime: unreadable lane frame, exiting: ${err instanceof Error ? err.name : 'error'}\n`)
    process.exit(1)
  }
})
// The API process is gone (or the lane broke): the child's main thread ends the process.
lane.on('close', () => process.exit(1))

/** A frame too large for this worker: its call fails, the lane goes on. */
function refuse(request: LaneRequest): void {
  const tooLarge = 'The Reactor call is larger than the runtime takes.'
  switch (request.t) {
    case 'invoke':
      return done(request.id, cache.holds(request.slot), { kind: 'error', code: 'reactor_error', detail: tooLarge })
    case 'compile':
      return send({ t: 'compiled', id: request.id, error: tooLarge })
    case 'bridge-result':
      answers.get(request.id)?.(request.callId, false, 'The answer of the service call is larger than the runtime takes.')
      return
    case 'drop':
      return
  }
}

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
        (error) => send({ t: 'compiled', id: request.id, error: error === undefined ? undefined : cut(error) }),
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

async function invoke(request: Extract<LaneRequest, { t: 'invoke' }>, body: string): Promise<void> {
  const { id, fresh } = request
  // A cold start's body is the code, then the input (see protocol.ts).
  const codeChars = fresh === undefined ? 0 : Math.min(Math.max(0, Math.trunc(fresh.codeChars) || 0), body.length)
  const code = fresh === undefined ? undefined : { reactorId: fresh.reactorId, version: fresh.version, code: body.slice(0, codeChars) }
  const input = codeChars === 0 ? body : body.slice(codeChars)
  let slot: IsolateSlot | undefined
  try {
    slot = await cache.acquire(request.slot, request.keep, code)
  } catch (err) {
    return done(id, false, { kind: 'error', code: 'reactor_error', detail: `The Reactor code does not compile: ${describeCompileError(err, code?.code ?? '')}` })
  }
  if (slot === undefined) return done(id, false, { kind: 'error', code: 'reactor_error', detail: 'The Reactor runtime lost the isolate of this call.' })
  const stopsBefore = slot.syncStops
  const outcome = await runInvocation(slot, input, request.ms, linkFor(id), limits).catch(
    (): WireOutcome => ({ kind: 'error', code: 'reactor_error', detail: 'The Reactor runtime failed during the call.' }),
  )
  // Released before answering: the answer says whether the isolate stays warm.
  done(id, cache.release(slot), outcome, slot.syncStops > stopsBefore)
}

/** Text for the caller: at most REACTOR_MESSAGE_MAX_CHARS, as a Reactor's own message. */
function cut(text: string): string {
  return text.length > REACTOR_MESSAGE_MAX_CHARS ? `${text.slice(0, REACTOR_MESSAGE_MAX_CHARS)}...` : text
}

/**
 * The API process takes frames up to replyFrameMaxBytes and kills a runtime that sends a larger
 * one: a result is checked against the payload limit (decode-run.ts), and a detail is cut here,
 * whatever produced it; a frame still too large is answered as an error.
 */
function done(id: number, kept: boolean, outcome: WireOutcome, overran = false): void {
  const checked: WireOutcome = outcome.kind === 'error' ? { kind: 'error', code: outcome.code, detail: cut(outcome.detail) } : outcome
  const [head, body] = splitOutcome(checked)
  const reply: LaneReply = { t: 'done', id, kept, outcome: head }
  if (overran) reply.overran = true
  let frame = encodeFrame(reply, body)
  if (frame.length > replyFrameMaxBytes(limits.payloadMaxBytes)) {
    reply.outcome = { kind: 'error', code: 'reactor_error', detail: `The Reactor result is larger than the ${limits.payloadMaxBytes}-byte limit.` }
    frame = encodeFrame(reply)
  }
  writeCoalesced(lane, frame)
}

send({ t: 'ready' })
