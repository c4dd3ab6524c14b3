/**
 * Entry of the Reactor runtime child process (forked by ReactorSupervisor with
 * --no-node-snapshot, which worker threads inherit). Its main thread only starts one worker
 * thread per lane and watches them: calls travel between the API process and the workers over
 * the lanes directly (protocol.ts). It never reads the environment or touches stores: all it
 * knows arrives in `init`.
 */
import { extname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Worker } from 'node:worker_threads'
import { describeError } from '../../../errors/log-safe.js'
import { LANE_FD_BASE, type ChildMessage, type ParentMessage, type RuntimeLimits, type WorkerData } from '../shared/protocol.js'

function send(message: ChildMessage): void {
  // Once the API process is gone there is nobody to answer; 'disconnect' ends this process.
  if (process.connected) process.send?.(message)
}

/**
 * A worker owns its lane's file descriptor: a worker that dies takes the lane with it, and a new
 * thread could not open it again. So a lost worker ends the process; the supervisor fails the
 * calls in flight and starts a fresh runtime (a crash of Reactor code's own making is an
 * isolate's, handled in the worker; this is for failures of the runtime itself).
 */
function start(limits: RuntimeLimits): void {
  const fromSource = extname(fileURLToPath(import.meta.url)) === '.ts'
  const entry = new URL(fromSource ? './worker-from-source.cjs' : './worker.js', import.meta.url)
  const sourceEntry = fromSource ? fileURLToPath(new URL('./worker.ts', import.meta.url)) : undefined
  for (let lane = 0; lane < limits.workers; lane++) {
    const workerData: WorkerData = { limits, laneFd: LANE_FD_BASE + lane, sourceEntry }
    const worker = new Worker(entry, { workerData })
    worker.on('error', (err) => send({ type: 'log', level: 'error', msg: 'reactor runtime worker failed', data: { lane }, err: describeError(err) }))
    worker.on('exit', (code) => {
      send({ type: 'log', level: 'error', msg: 'reactor runtime worker exited; restarting the runtime', data: { lane, code } })
      process.exit(1)
    })
  }
}

process.on('message', (message: ParentMessage) => {
  if (message.type === 'init') start(message.limits)
})
// Never outlive the API process: an orphaned runtime would hold isolates forever.
process.on('disconnect', () => process.exit())
// The API process decides when the runtime ends (its close, or SIGKILL at the shutdown deadline).
// A signal to the whole process group (a terminal's Ctrl-C, systemd's KillMode=control-group)
// reaches this process too, and must not end the calls the API is still draining.
process.on('SIGTERM', () => undefined)
process.on('SIGINT', () => undefined)
