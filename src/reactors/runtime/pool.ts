import { Piscina } from 'piscina'
import { isBridgePortMessage, type BridgePortMessage, type RuntimeLimits, type WorkerTask } from './protocol.js'

/**
 * Invocations one worker thread runs at once. Isolate code runs on isolated-vm's own threads
 * and tasks only await it, so a worker is not busy while its isolates compute; the cap bounds
 * memory instead: workers x this x memoryMb is the worst case when every call is a cold
 * memory bomb (2 x 16 x 128 MB = 4 GB by default).
 */
export const TASKS_PER_WORKER = 16

interface Routing {
  affinity: string | undefined
  onDispatch: ((threadId: number) => void) | undefined
}

type PiscinaTaskLike = Record<symbol, unknown>
type BalancerWorker = { id: number; currentUsage: number; terminating: boolean; destroyed: boolean }

/**
 * A piscina pool whose balancer pins each Reactor to one worker ("sticky" by reactor id), so
 * the worker that holds a Reactor's warm isolates is the one that gets its calls, and hot
 * concurrency is counted in one place. Tasks without affinity go to the least busy worker.
 */
export class ReactorPool {
  private readonly pool: Piscina<WorkerTask, unknown>
  private readonly sticky = new Map<string, number>()

  /** `onBridgePort` receives each worker thread's bridge channel as the thread starts. */
  constructor(limits: RuntimeLimits, workerFile: URL, onBridgePort: (message: BridgePortMessage) => void) {
    this.pool = new Piscina<WorkerTask, unknown>({
      filename: workerFile.href,
      minThreads: limits.workers,
      maxThreads: limits.workers,
      idleTimeout: Infinity,
      concurrentTasksPerWorker: TASKS_PER_WORKER,
      // The default 'sync' mode parks an idle worker in Atomics.wait, which freezes its event
      // loop: the idle-time context preparation and sweeps would never run.
      atomics: 'disabled',
      workerData: limits,
      // Deadlines are enforced per invocation; a bounded queue would only add a second failure mode.
      maxQueue: Infinity,
      // Nobody reads piscina's run/wait-time histograms; recording them costs every task.
      recordTiming: false,
      loadBalancer: (task, workers) => this.pick(task as unknown as PiscinaTaskLike, workers),
    })
    this.pool.on('message', (message: unknown) => {
      if (isBridgePortMessage(message)) onBridgePort(message)
    })
  }

  /** `onDispatch` learns which thread took the task, so a wedged one can be terminated. */
  run<R>(task: WorkerTask, affinity?: string, onDispatch?: (threadId: number) => void): Promise<R> {
    const routing: Routing = { affinity, onDispatch }
    return this.pool.run({ ...task, [Piscina.queueOptionsSymbol]: routing }) as Promise<R>
  }

  /**
   * Resolves once every worker has loaded its module: otherwise the first calls would pay for
   * thread start-up (and, from source, TypeScript compilation) inside their deadline. Tasks
   * without affinity go to the least busy worker, so `workers` pings reach one worker each.
   */
  async warmUp(workers: number): Promise<void> {
    await Promise.all(Array.from({ length: workers }, () => this.run({ op: 'ping' })))
  }

  /**
   * Sends a retire to the worker holding the Reactor, if any does. The pin itself stays: a call
   * racing the retire must land on the same worker, and an entry is only an id and a number.
   */
  async retire(reactorId: string): Promise<void> {
    if (!this.sticky.has(reactorId)) return
    await this.run({ op: 'retire', reactorId }, reactorId)
  }

  /** Piscina rejects the thread's tasks and starts a replacement. */
  async terminate(threadId: number): Promise<void> {
    await this.pool.threads.find((w) => w.threadId === threadId)?.terminate()
  }

  async destroy(): Promise<void> {
    await this.pool.destroy()
  }

  private pick<W extends BalancerWorker>(task: PiscinaTaskLike, workers: W[]): W | null {
    const routing = task[Piscina.queueOptionsSymbol] as Routing | null
    const key = routing?.affinity
    const live = workers.filter((w) => !w.terminating && !w.destroyed)
    let target = key === undefined ? undefined : live.find((w) => w.id === this.sticky.get(key))
    if (target === undefined) {
      target = leastBusy(live)
      if (target !== undefined && key !== undefined) this.sticky.set(key, target.id)
    }
    if (target === undefined || target.currentUsage >= TASKS_PER_WORKER) return null
    routing?.onDispatch?.(target.id)
    return target
  }
}

function leastBusy<W extends BalancerWorker>(workers: W[]): W | undefined {
  let best: W | undefined
  for (const w of workers) if (best === undefined || w.currentUsage < best.currentUsage) best = w
  return best
}
