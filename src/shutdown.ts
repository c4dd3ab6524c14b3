import type { Server, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { Logger } from 'pino'
import type { Drain } from './http/drain.js'
import type { Services } from './services.js'

/** After the deadline: time for aborted calls to be answered, and for the stores to close. */
const ANSWER_MS = 400
const CLOSE_MS = 400

/**
 * Tracks sockets and answers still to be written, so that a drain can put `Connection: close`
 * on each keep-alive connection's next answer and cut what is left at the deadline.
 */
export function trackConnections(server: Server, drain: Drain): { sockets: Set<Socket>; pending: Set<ServerResponse> } {
  const sockets = new Set<Socket>()
  const pending = new Set<ServerResponse>()
  server.on('connection', (s) => {
    sockets.add(s)
    s.on('close', () => sockets.delete(s))
  })
  // Registered before the app's handler, so it runs first for every request.
  server.prependListener('request', (_req, res: ServerResponse) => {
    if (drain.draining) res.setHeader('Connection', 'close')
    pending.add(res)
    res.on('close', () => pending.delete(res))
  })
  return { sockets, pending }
}

/**
 * SIGTERM: readiness goes down and the listener closes at once; idle keep-alive connections
 * close, busy ones close after their current answer. In-flight requests get `graceMs` to
 * finish. At the deadline, destination and Reactor calls still running are aborted (their
 * callers are answered 503 / proxy_error), then the remaining sockets are cut, the stores close,
 * and the process exits 0, never later than `graceMs` + 1 s.
 */
export async function drainAndExit(server: Server, services: Services, drain: Drain, logger: Logger, tracked: ReturnType<typeof trackConnections>): Promise<never> {
  const graceMs = services.config.shutdownGraceMs
  const hardStop = setTimeout(() => exit(logger, 'the shutdown overran; exiting anyway'), graceMs + ANSWER_MS + CLOSE_MS + 150)
  drain.draining = true
  for (const res of tracked.pending) if (!res.headersSent) res.setHeader('Connection', 'close')
  const closed = new Promise<void>((resolve) => server.close(() => resolve()))
  server.closeIdleConnections()
  logger.info({ graceMs, inFlight: tracked.pending.size }, 'draining: readiness is down, no new connections')

  if (!(await settles(closed, graceMs))) {
    drain.cut = true
    logger.warn({ inFlight: tracked.pending.size }, 'shutdown deadline: aborting destination and Reactor calls still running')
    await settles(services.abortInFlight(), ANSWER_MS / 2)
    if (!(await settles(closed, ANSWER_MS / 2))) {
      logger.warn({ cut: tracked.pending.size }, 'cutting requests that did not finish in time')
      for (const s of tracked.sockets) s.destroy()
    }
  }
  await settles(services.close(), CLOSE_MS)
  clearTimeout(hardStop)
  return exit(logger, 'stopped')
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
