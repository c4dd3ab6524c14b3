/**
 * The Reactor runtime alone (issue 15): the path API process -> runtime child -> worker ->
 * isolate and back, without HTTP, the vault or the audit log. A ReactorSupervisor runs in this
 * process (the API side) and drives its runtime child with warm echo calls; this process and the
 * child (which inherits the pinning) share core 0, as Tessera and its child do in `npm run bench`.
 * The HTTP figures of bench/reactors.ts mix this path with everything else a request does; this
 * one says what the runtime costs per call on each side of the process boundary.
 *
 *   npx tsx bench/runtime.ts                                   (8 callers, 5 rounds of 3 s)
 *   RUNTIME_BENCH_CALLERS=8 RUNTIME_BENCH_ROUNDS=5 RUNTIME_BENCH_SECONDS=3 npx tsx bench/runtime.ts
 *
 * Each caller has its own echo Reactor (and tenant), so every call is warm and no cap holds it.
 */
import { readFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { pino } from 'pino'
import { loadConfig } from '../src/config/index.js'
import type { HostBridges } from '../src/reactors/supervisor.js'
import { ReactorSupervisor } from '../src/reactors/supervisor.js'
import { median, percentileUs, progress, round0, round1 } from './lib/measure.js'
import { canPin, cpuTimeUs, idleProbe, machineInfo, pinThisProcess, processTree, SUT_CORE } from './lib/proc.js'
import { writeResult } from './lib/write-result.js'

const HERE = dirname(fileURLToPath(import.meta.url))
const DEFAULT_OUT = resolve(HERE, 'results/runtime-latest.json')
const ECHO = readFileSync(join(HERE, '../reactors/echo.js'), 'utf8')
const ARGS = { card: { number: '4242424242424242', cvc: '123' }, amount: 1999, currency: 'usd' }

/** The echo Reactor makes no bridge call; one that did would be a bug in this bench. */
const refuse = () => Promise.reject(new Error('the runtime bench makes no bridge calls'))
const NO_BRIDGES: HostBridges = { tokenize: refuse, detokenize: refuse, fetch: refuse }

export interface RuntimeRound {
  calls_per_s: number
  /** CPU of the API side (this process: supervisor, admission, lanes) per call. */
  host_cpu_us: number
  /** CPU of the runtime child (workers, isolates) per call. */
  child_cpu_us: number
}

export async function runRuntimeBench(options: { callers?: number; rounds?: number; seconds?: number; outFile?: string | null } = {}) {
  const callers = options.callers ?? 8
  const rounds = options.rounds ?? 5
  const seconds = options.seconds ?? 3
  // Before the child is forked: it inherits the affinity of this thread.
  const pinning = canPin() && pinThisProcess(SUT_CORE) ? `this process and the runtime child pinned to core ${SUT_CORE}` : 'not pinned'
  const config = loadConfig({ SVC_LOG_LEVEL: 'silent', SVC_KEY_HASH_SECRET: 'b'.repeat(40), SVC_MASTER_KEY: Buffer.alloc(32, 7).toString('base64') })
  const sup = new ReactorSupervisor({ config: config.reactors, logger: pino({ level: 'silent' }), bridges: NO_BRIDGES })
  const loadStart = machineInfo().loadAverage
  try {
    await sup.start()
    const call = (i: number) => sup.invoke({ tenantId: `tenant-${i}`, reactorId: `echo-${i}`, version: '1', code: ECHO, args: ARGS, configuration: {}, context: undefined })
    const check = await call(0)
    if (check.kind !== 'ok' || JSON.stringify((check.value as { raw?: unknown }).raw) !== JSON.stringify(ARGS)) throw new Error(`echo check: ${JSON.stringify(check)}`)

    const load = async (n: number, ms: number): Promise<number> => {
      let calls = 0
      const end = Date.now() + ms
      await Promise.all(Array.from({ length: n }, async (_, i) => {
        while (Date.now() < end) {
          await call(i)
          calls++
        }
      }))
      return calls
    }
    progress(`runtime: warm-up, ${callers} callers`)
    await load(callers, 3000)
    const pids = [process.pid, ...processTree(sup.pid!)]
    const runs: RuntimeRound[] = []
    for (let r = 0; r < rounds; r++) {
      progress(`runtime: round ${r + 1}/${rounds}`)
      const before = pids.map(cpuTimeUs)
      const t0 = process.hrtime.bigint()
      const calls = await load(callers, seconds * 1000)
      const elapsed = Number(process.hrtime.bigint() - t0) / 1e9
      const used = pids.map((pid, i) => cpuTimeUs(pid) - before[i]!)
      const child = used.slice(1).reduce((a, b) => a + b, 0)
      runs.push({ calls_per_s: round0(calls / elapsed), host_cpu_us: round1(used[0]! / calls), child_cpu_us: round1(child / calls) })
    }
    // One caller: back to back (the core never idles), then paced (1 ms idle before each call).
    // On a VM whose idle core comes back slow (cold caches, a descheduled vCPU) the two differ
    // several-fold, and an HTTP client on another core paces Tessera the same way.
    const roundTrips = async (idleMs: number): Promise<number[]> => {
      const samples: number[] = []
      for (let i = 0; i < 2000; i++) {
        if (idleMs > 0) await new Promise((r) => setTimeout(r, idleMs))
        const t0 = process.hrtime.bigint()
        await call(0)
        samples.push(Number(process.hrtime.bigint() - t0))
      }
      return samples
    }
    progress('runtime: round trips at c=1, back to back')
    const hot = await roundTrips(0)
    progress('runtime: round trips at c=1, paced')
    const paced = await roundTrips(1)
    const summary = {
      calls_per_s: round0(median(runs.map((x) => x.calls_per_s))),
      host_cpu_us: round1(median(runs.map((x) => x.host_cpu_us))),
      child_cpu_us: round1(median(runs.map((x) => x.child_cpu_us))),
      c1_p50_us: round0(percentileUs(hot, 50)),
      c1_p99_us: round0(percentileUs(hot, 99)),
      c1_paced_p50_us: round0(percentileUs(paced, 50)),
      c1_paced_p99_us: round0(percentileUs(paced, 99)),
    }
    const result = { date: new Date().toISOString(), callers, seconds, pinning, workers: config.reactors.workers, summary, rounds: runs, idleProbe: await idleProbe(), machine: { ...machineInfo(), loadAverageStart: loadStart } }
    await writeResult(options.outFile, DEFAULT_OUT, result)
    return result
  } finally {
    await sup.close()
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const env = (name: string) => (process.env[name] === undefined ? undefined : Number(process.env[name]))
  const result = await runRuntimeBench({ callers: env('RUNTIME_BENCH_CALLERS'), rounds: env('RUNTIME_BENCH_ROUNDS'), seconds: env('RUNTIME_BENCH_SECONDS') })
  console.table(result.rounds)
  console.log(result.summary)
  console.log(`idle probe: a short computation ${result.idleProbe.busyUs} µs back to back, ${result.idleProbe.afterIdleUs} µs after 1 ms idle`)
  console.log(`${result.pinning}; ${result.workers} workers; load average ${result.machine.loadAverageStart.join(' ')} at start, ${result.machine.loadAverage.join(' ')} at end`)
}
