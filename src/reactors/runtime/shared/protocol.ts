/**
 * The typed messages that cross the boundaries of the Reactor runtime:
 *   API process (supervisor) <-> runtime child's main thread, over Node IPC: start-up and logs;
 *   API process <-> each worker thread, over that worker's lane (a socket pair the child process
 *   inherits, one per worker; frames.ts): every invocation, bridge call and compile check.
 * Calls go straight to the worker thread that holds the isolate: no hop through the child's
 * main thread, no task queue, and the code travels only when an isolate is created.
 * This module must stay free of isolated-vm: the API process imports it.
 */
import type { LoggedError } from '../../../errors/log-safe.js'

/** What the child enforces; sent once in `init` so the child never reads the environment itself. */
export interface RuntimeLimits {
  timeoutMs: number
  memoryMb: number
  payloadMaxBytes: number
  /** Bridge calls of one invocation sent to the API process at once; the prelude queues the rest. */
  bridgeConcurrency: number
  workers: number
  /** The longest Reactor code (UTF-16 units) a save accepts; a cold start's frame carries it. */
  codeMaxChars: number
}

/** Room in a lane frame for its header, beyond the value it carries. */
export const FRAME_HEADROOM_BYTES = 64 * 1024

/**
 * The largest frame a worker sends (and the API process takes): a result or a bridge argument
 * (at most the payload limit, checked in UTF-8 bytes), plus a header the worker keeps small
 * (error details are cut, see worker.ts).
 */
export function replyFrameMaxBytes(payloadMaxBytes: number): number {
  return payloadMaxBytes + FRAME_HEADROOM_BYTES
}

/**
 * The largest frame the API process sends a worker: an input (at most the payload limit) after
 * a cold start's code, which travels in the body as is (in the header it was JSON-escaped, up to
 * six bytes per character, and a valid call overran the worker's bound). UTF-8 takes at most
 * three bytes per UTF-16 unit.
 */
export function requestFrameMaxBytes(limits: Pick<RuntimeLimits, 'payloadMaxBytes' | 'codeMaxChars'>): number {
  return limits.payloadMaxBytes + 3 * limits.codeMaxChars + FRAME_HEADROOM_BYTES
}

/** Worker `i` talks over inherited file descriptor `LANE_FD_BASE + i` (after stdin/out/err and IPC). */
export const LANE_FD_BASE = 4

/** What the child's main thread gives each worker thread. */
export interface WorkerData {
  limits: RuntimeLimits
  laneFd: number
  /** From TypeScript source: worker.ts, required by worker-from-source.cjs. */
  sourceEntry: string | undefined
}

/** Whether an invocation found a warm isolate or had to create one. */
export type StartKind = 'warm' | 'cold'

export const bridgeOps = ['tokenize', 'detokenize', 'fetch'] as const
export type BridgeOp = (typeof bridgeOps)[number]

/** Error codes a Reactor run may end with (a subset of errors/codes.ts). */
export type RunErrorCode = 'bad_request' | 'unauthenticated' | 'forbidden' | 'reactor_error' | 'reactor_timeout'

/**
 * The result of one run. Values travel as JSON text ('' stands for `undefined`) so they are
 * parsed exactly once, in the API process.
 */
export type WireOutcome =
  | { kind: 'ok'; json: string }
  | { kind: 'response'; status: number; headers: Record<string, string>; json: string }
  | { kind: 'error'; code: RunErrorCode; detail: string }

/** A WireOutcome without its value: the frame header; the value is the frame body. */
export type OutcomeHead = { kind: 'ok' } | { kind: 'response'; status: number; headers: Record<string, string> } | { kind: 'error'; code: RunErrorCode; detail: string }

// --- IPC: API process <-> child main thread --------------------------------------------------
export type ParentMessage = { type: 'init'; limits: RuntimeLimits }

/** A fixed text of the child's own code; an error arrives described (no message: it may quote data). */
export type ChildMessage = { type: 'log'; level: 'debug' | 'warn' | 'error'; msg: string; data: { lane?: number; code?: number }; err?: LoggedError }

// --- Lane: API process -> worker (the frame body in brackets) ---------------------------------
export type LaneRequest =
  /**
   * [input JSON, after the code on a cold start] Run on isolate `slot`, within `ms`. A new slot
   * comes with the Reactor's code (the body's first `codeChars` UTF-16 units) and ids, to cache
   * what is learnt about that version; `keep` says whether it stays warm.
   */
  | { t: 'invoke'; id: number; slot: number; ms: number; keep: boolean; fresh?: { reactorId: string; version: string; codeChars: number } }
  /** Dispose these idle isolates (scale-in, eviction, a retired version). */
  | { t: 'drop'; slots: number[] }
  /** [code] Syntax check only. */
  | { t: 'compile'; id: number }
  /** [value JSON when ok, else the error message] The answer to one bridge call. */
  | { t: 'bridge-result'; id: number; callId: number; ok: boolean }

// --- Lane: worker -> API process ----------------------------------------------------------------
export type LaneReply =
  /** The worker has loaded isolated-vm and its prelude: the lane is open for calls. */
  | { t: 'ready' }
  /**
   * [value JSON] The call ended; `kept`: the isolate is still alive and warm; `overran`: it ran
   * synchronously past the budget and started again (see child/invocation.ts).
   */
  | { t: 'done'; id: number; kept: boolean; overran?: true; outcome: OutcomeHead }
  | { t: 'compiled'; id: number; error: string | undefined }
  /** [argument JSON] A Reactor asked the host for a service during invocation `id`. */
  | { t: 'bridge'; id: number; callId: number; op: BridgeOp }

export const isBridgeOp = (value: unknown): value is BridgeOp => (bridgeOps as readonly unknown[]).includes(value)

// Field by field, not with rest and spread: on Node 20 `{ ...head, json }` takes V8's slow path
// (a microsecond or more), twice per call.
export function splitOutcome(outcome: WireOutcome): [OutcomeHead, string] {
  switch (outcome.kind) {
    case 'error':
      return [outcome, '']
    case 'ok':
      return [{ kind: 'ok' }, outcome.json]
    case 'response':
      return [{ kind: 'response', status: outcome.status, headers: outcome.headers }, outcome.json]
  }
}

export function joinOutcome(head: OutcomeHead, body: string): WireOutcome {
  switch (head.kind) {
    case 'error':
      return head
    case 'ok':
      return { kind: 'ok', json: body }
    case 'response':
      return { kind: 'response', status: head.status, headers: head.headers, json: body }
  }
}
