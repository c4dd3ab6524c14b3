import type { Server, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { Logger } from 'pino'
import type { Drain } from './http/drain.js'
import type { CloseBudget, Services } from './services.js'

/** After the deadline: time for aborted calls to be answered. */
const ANSWER_MS = 400
/** The close steps after it, at the least (see closeBudget). */
const RELEASE_MS = 100
const AUDIT_MS = 300
const DATABASE_MS = 150
/** The last of the second after the grace: room for the exit itself on a loaded machine. */
const MARGIN_MS = 50
/** How often the drain looks for connections that have no request in them. */
const QUIET_MS = 100

interface SocketState {
  /** Answers still to be written on it. */
  busy: number
  /** `bytesRead` when it last had nothing to answer: more since then is a request on its way. */
  restedAt: number
}

export interface Tracked {
  sockets: Map<Socket, SocketState>
  pending: Set<ServerResponse>
}

/**
 * Tracks sockets and answers still to be written, so that a drain can put `Connection: close`
 * on each keep-alive connection's next answer, close connections with no request in them, and
 * cut what is left at the deadline.
 */
export function trackConnections(server: Server, drain: Drain): Tracked {
  const sockets = new Map<Socket, SocketState>()
  const pending = new Set<ServerResponse>()
  server.on('connection', (s: Socket) => {
    sockets.set(s, { busy: 0, restedAt: 0 })
    s.on('close', () => sockets.delete(s))
  })
  // Registered before the app's handler, so it runs first for every request.
  server.prependListener('request', (req, res: ServerResponse) => {
    if (drain.draining) res.setHeader('Connection', 'close')
    pending.add(res)
    const state = sockets.get(req.socket)
    if (state) state.busy++
    res.on('close', () => {
      pending.delete(res)
      if (state && --state.busy === 0) state.restedAt = req.socket.bytesRead
    })
  })
  return { sockets, pending }
}

/**
 * SIGTERM: readiness goes down and the listener closes at once; connections with no request in
 * them close, busy ones close after their current answer. In-flight requests get `graceMs` to
 * finish. At the deadline, destination and Reactor calls still running are aborted (their
 * callers are answered), then the remaining sockets are cut. Then the services close, each step
 * bounded (the audit flush before the database), and the process exits 0, never later than
 * `graceMs` + 1 s.
 */
export async function drainAndExit(server: Server, services: Services, drain: Drain, logger: Logger, tracked: Tracked): Promise<never> {
  const graceMs = services.config.shutdownGraceMs
  const stopBy = Date.now() + graceMs + 1000 - MARGIN_MS
  const hardStop = setTimeout(() => exit(logger, 'the shutdown overran; exiting anyway'), graceMs + 1000)
  drain.draining = true
  for (const res of tracked.pending) if (!res.headersSent) res.setHeader('Connection', 'close')
  const closed = new Promise<void>((resolve) => server.close(() => resolve()))
  server.closeIdleConnections()
  const quiet = setInterval(closeQuietConnections, QUIET_MS, tracked)
  closeQuietConnections(tracked)
  logger.info({ graceMs, inFlight: tracked.pending.size }, 'draining: readiness is down, no new connections')

  if (!(await settles(closed, graceMs))) await cutAtDeadline(services, drain, logger, tracked, closed)
  clearInterval(quiet)
  await services.close(closeBudget(stopBy))
  clearTimeout(hardStop)
  return exit(logger, 'stopped')
}

/**
 * Node's closeIdleConnections() leaves a connection that never sent a request: pre-connected
 * pools (load balancers, undici) would hold every drain for the whole grace.
 */
function closeQuietConnections(tracked: Tracked): void {
  for (const [socket, state] of tracked.sockets) {
    if (state.busy === 0 && socket.bytesRead === state.restedAt) socket.destroy()
  }
}

async function cutAtDeadline(services: Services, drain: Drain, logger: Logger, tracked: Tracked, closed: Promise<void>): Promise<void> {
  drain.cut = true
  logger.warn({ inFlight: tracked.pending.size }, 'shutdown deadline: aborting destination and Reactor calls still running')
  await settles(services.abortInFlight(), ANSWER_MS / 2)
  if (await settles(closed, ANSWER_MS / 2)) return
  logger.warn({ cut: tracked.pending.size }, 'cutting requests that did not finish in time')
  for (const socket of tracked.sockets.keys()) socket.destroy()
}

/**
 * Each step gets at least its own budget; time to spare before `stopBy` (a drain that ended
 * early) goes a quarter to the release, three quarters to the audit flush.
 */
function closeBudget(stopBy: number): CloseBudget {
  const spare = Math.max(0, stopBy - Date.now() - RELEASE_MS - AUDIT_MS - DATABASE_MS)
  return { releaseMs: RELEASE_MS + spare / 4, auditMs: AUDIT_MS + (spare * 3) / 4, databaseMs: DATABASE_MS }
}

export interface Signals {
  /** A signal came before the server listened: what was opened is to be closed (`stopUnserved`). */
  readonly requested: boolean
  /** Once listening: a signal, one taken already included, drains. */
  serve(drain: () => void): void
}

/**
 * SIGTERM and SIGINT from the start of main(): Node's default action would kill the process
 * mid-start (a data-dir lock and a half-open store left behind). A start-up that has not
 * finished by grace + 1 s after the signal is not waited for.
 */
export function takeSignals(logger: Logger, graceMs: number): Signals {
  let signal: string | undefined
  let onSignal: (() => void) | undefined
  let overrun: NodeJS.Timeout | undefined
  const receive = (name: string) => {
    if (signal !== undefined) return
    signal = name
    logger.info({ signal: name }, 'shutting down')
    if (onSignal) return onSignal()
    overrun = setTimeout(() => exit(logger, 'the start-up did not finish in time; exiting anyway'), graceMs + 1000)
  }
  process.on('SIGTERM', () => receive('SIGTERM'))
  process.on('SIGINT', () => receive('SIGINT'))
  return {
    get requested() {
      return signal !== undefined
    },
    serve(drain) {
      clearTimeout(overrun)
      onSignal = drain
      if (signal !== undefined) drain()
    },
  }
}

/** A signal came during the start-up: nothing was served, so there is nothing to drain. */
export async function stopUnserved(services: Services, logger: Logger): Promise<never> {
  await services.close(closeBudget(Date.now() + 1000 - MARGIN_MS))
  return exit(logger, 'stopped before serving')
}

async function settles(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)))
  const done = promise.then(() => true, () => true)
  return Promise.race([done, late]).finally(() => clearTimeout(timer))
}

function exit(logger: Logger, msg: string): never {
  logger.info(msg)
  // pino writes synchronously to stdout by default, so the line is out before the exit.
  process.exit(0)
}
