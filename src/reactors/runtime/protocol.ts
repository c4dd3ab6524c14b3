/**
 * The typed messages that cross the two boundaries of the Reactor runtime:
 *   API process (supervisor) <-> runtime child process, over Node IPC ('advanced' serialization);
 *   child main thread <-> piscina worker thread, as piscina tasks plus one MessagePort per worker
 *   for bridge calls (the worker creates it and hands one end over when it starts).
 * This module must stay free of isolated-vm: the API process imports it.
 */
import type { MessagePort } from 'node:worker_threads'

/** What the child enforces; sent once in `init` so the child never reads the environment itself. */
export interface RuntimeLimits {
  timeoutMs: number
  memoryMb: number
  hotConcurrency: number
  payloadMaxBytes: number
  workers: number
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

// --- API process -> child -------------------------------------------------------------------
export type ParentMessage =
  | { type: 'init'; limits: RuntimeLimits }
  | { type: 'invoke'; id: number; reactorId: string; version: string; code: string; input: string }
  | { type: 'compile'; id: number; code: string }
  | { type: 'retire'; reactorId: string }
  | BridgeResult

/** The answer to one bridge call: `json` is the value as JSON when `ok`, else the error message. */
export interface BridgeResult {
  type: 'bridge-result'
  id: number
  callId: number
  ok: boolean
  json: string
}

// --- child -> API process -------------------------------------------------------------------
export type ChildMessage =
  | { type: 'ready' }
  | { type: 'invoked'; id: number; start: StartKind | undefined; outcome: WireOutcome }
  | { type: 'compiled'; id: number; error: string | undefined }
  | BridgeCall
  | { type: 'log'; level: 'debug' | 'warn' | 'error'; msg: string; data: Record<string, unknown> }

/** A Reactor asked the host for a service; `json` is the argument as JSON. */
export interface BridgeCall {
  type: 'bridge'
  id: number
  callId: number
  op: BridgeOp
  json: string
}

// --- child main thread <-> piscina worker -----------------------------------------------------
export interface InvokeTask {
  op: 'invoke'
  reactorId: string
  version: string
  code: string
  input: string
  /** The invocation's id (as in the API process): bridge calls and their answers carry it. */
  id: number
  /** Epoch ms; the child starts the clock on receipt, so queueing time counts. */
  deadlineAt: number
}

/** `ping` makes a worker load its module (and isolated-vm) before the first real call. */
export type WorkerTask = InvokeTask | { op: 'compile'; code: string } | { op: 'retire'; reactorId: string } | { op: 'ping' }

export interface InvokeReply {
  start: StartKind | undefined
  outcome: WireOutcome
}

export interface CompileReply {
  error: string | undefined
}

/**
 * Worker -> child main over `parentPort` (piscina emits it as a pool 'message' event), once per
 * worker thread at start-up: the child end of that worker's bridge channel. Setting up one
 * channel per worker instead of one per invocation keeps channel creation, transfer and closing
 * off every call.
 */
export interface BridgePortMessage {
  type: 'tessera-bridge-port'
  threadId: number
  port: MessagePort
}

export const isBridgePortMessage = (value: unknown): value is BridgePortMessage =>
  typeof value === 'object' && value !== null && (value as { type?: unknown }).type === 'tessera-bridge-port'

/** Worker -> child main over the worker's bridge port. */
export interface PortBridgeCall {
  /** The invocation; the child checks that it runs on the worker that sent the call. */
  id: number
  callId: number
  op: BridgeOp
  json: string
}

/** Child main -> worker over the worker's bridge port. */
export interface PortBridgeResult {
  id: number
  callId: number
  ok: boolean
  json: string
}

export const isBridgeOp = (value: unknown): value is BridgeOp => (bridgeOps as readonly unknown[]).includes(value)
