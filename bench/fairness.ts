/**
 * `npm run bench:fairness`: Reactor fairness and shedding (issue 13, items 3 and 4) against one
 * Tessera process with a 5 s Reactor deadline (as in the report). The integration tests
 * assert the outcomes (success, 503, never 504); this measures the latencies they leave out:
 *
 *   victim, idle      tenant B's warm echo invoke at c=1: p50, p99
 *   victim, hostile   the same while tenant A keeps 60 `while(true){}` calls in flight (each runs
 *                     to its deadline or is shed, and is sent again at once): A holds its tenant
 *                     cap and its queue, B must stay near its idle latency
 *   overload          Reactor-only load offered open-loop at `--rate` calls/s (default 150) to a
 *                     Reactor that spends 20 ms of CPU per call: every answer must be a 200 or a
 *                     503 within the deadline; the slowest answer and the counts are reported
 *
 * Real Postgres and Redis when DATABASE_URL / REDIS_URL are set, the embedded defaults otherwise.
 * Writes bench/results/<date>-fairness.md and .json.
 */
import { mkdir, writeFile } from 'node:fs/promises'
import { availableParallelism } from 'node:os'
import path from 'node:path'
import { parseArgs } from 'node:util'
import { Pool } from 'undici'
import { call } from './lib/api.js'
import { closedLoop, percentileUs, progress, round0, type BenchRequest } from './lib/measure.js'
import { machineInfo } from './lib/proc.js'
import { machineLine, markdownTable } from './lib/report.js'
import { createBackend, ROOT, startTessera, type TesseraProcess } from './lib/tessera.js'

const { values: args } = parseArgs({ options: { 'victim-s': { type: 'string', default: '15' }, 'overload-s': { type: 'string', default: '10' }, rate: { type: 'string', default: '150' } } })
const VICTIM_MS = Number(args['victim-s']) * 1000
const OVERLOAD_MS = Number(args['overload-s']) * 1000
const RATE = Number(args.rate)
const DEADLINE_MS = 5000
const HOSTILE_CALLS = 60
const OPERATOR_KEY = `operator-${'x'.repeat(40)}`
const SLOW_CAP = Math.max(1, Math.floor(availableParallelism() / 2))

const ECHO = 'module.exports = async (req) => ({ raw: req.args })'
const SPIN = 'module.exports = async () => { while (true) {} }'
const BUSY_20MS = 'module.exports = async (req) => { const end = Date.now() + 20; while (Date.now() < end) {} return { raw: req.args } }'

interface Tenant {
  admin: string
  caller: string
}

async function tenant(url: string, name: string): Promise<Tenant> {
  const created = await call(url, OPERATOR_KEY, 'POST', '/tenants', { name })
  if (created.status !== 201) throw new Error(`tenant ${name}: ${created.status}`)
  const admin = created.body.application.key as string
  const rules = [{ priority: 1, container: '/', transform: 'mask', permissions: ['token:use'] }]
  const caller = await call(url, admin, 'POST', '/applications', { name: `${name} caller`, type: 'private', rules })
  return { admin, caller: caller.body.key as string }
}

async function reactor(url: string, admin: string, code: string): Promise<string> {
  const res = await call(url, admin, 'POST', '/reactors', { name: 'r', code })
  if (res.status !== 201) throw new Error(`reactor: ${res.status}`)
  return res.body.id as string
}

const react = (id: string, key: string): BenchRequest => ({
  method: 'POST',
  path: `/reactors/${id}/react`,
  headers: { 'SVC-API-KEY': key, 'content-type': 'application/json' },
  body: JSON.stringify({ args: { n: 1 } }),
})

/** Keeps `calls` requests in flight until `stop` is set; returns the statuses seen. */
async function keepBusy(url: string, req: BenchRequest, calls: number, stop: { done: boolean }): Promise<Map<number, number>> {
  const pool = new Pool(url, { connections: calls, pipelining: 1 })
  const statuses = new Map<number, number>()
  const loop = async () => {
    while (!stop.done) {
      const res = await pool.request({ method: req.method, path: req.path, headers: req.headers, body: req.body })
      await res.body.dump()
      statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1)
      // A shed call is answered at once: a short pause keeps these loops from spinning the bench's own CPU.
      if (res.statusCode === 503) await new Promise((r) => setTimeout(r, 50))
    }
  }
  await Promise.all(Array.from({ length: calls }, loop))
  await pool.close()
  return statuses
}

interface Overload {
  offered: number
  statuses: Record<string, number>
  slowestMs: number
  p99Ms: number
}

/** Open loop: one call every 1/rate s whatever the answers, each timed to its answer. */
async function overload(url: string, req: BenchRequest): Promise<Overload> {
  const pool = new Pool(url, { connections: 1024, pipelining: 1 })
  const statuses: Record<string, number> = {}
  const samplesNs: number[] = []
  const calls: Promise<void>[] = []
  const start = Date.now()
  for (let i = 0; Date.now() - start < OVERLOAD_MS; i++) {
    const due = start + (i * 1000) / RATE
    if (due > Date.now()) await new Promise((r) => setTimeout(r, due - Date.now()))
    const t = process.hrtime.bigint()
    calls.push(
      pool.request({ method: req.method, path: req.path, headers: req.headers, body: req.body, headersTimeout: 60_000, bodyTimeout: 60_000 }).then(
        async (res) => {
          await res.body.dump()
          samplesNs.push(Number(process.hrtime.bigint() - t))
          statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1
        },
        () => void (statuses.none = (statuses.none ?? 0) + 1),
      ),
    )
  }
  await Promise.all(calls)
  await pool.close()
  return { offered: calls.length, statuses, slowestMs: Math.round(Math.max(...samplesNs) / 1e6), p99Ms: Math.round(percentileUs(samplesNs, 99) / 1000) }
}

async function victimLatency(tessera: TesseraProcess, req: BenchRequest, durationMs: number): Promise<{ p50Us: number; p99Us: number; requests: number }> {
  const run = await closedLoop(tessera.url, req, { concurrency: 1, durationMs })
  return { p50Us: round0(percentileUs(run.samplesNs, 50)), p99Us: round0(percentileUs(run.samplesNs, 99)), requests: run.requests }
}

async function main(): Promise<void> {
  const databaseUrl = process.env.DATABASE_URL
  const backend = await createBackend(databaseUrl ? 'postgres' : 'pglite', { databaseUrl, redisUrl: process.env.REDIS_URL })
  const tessera = await startTessera(backend, { env: { SVC_OPERATOR_KEY: OPERATOR_KEY, SVC_REACTOR_TIMEOUT_MS: String(DEADLINE_MS) } })
  try {
    const hostile = await tenant(tessera.url, 'hostile')
    const victim = await tenant(tessera.url, 'victim')
    const spin = react(await reactor(tessera.url, hostile.admin, SPIN), hostile.caller)
    const echo = react(await reactor(tessera.url, victim.admin, ECHO), victim.caller)
    await closedLoop(tessera.url, echo, { concurrency: 1, requests: 50 })

    progress('victim, idle')
    const idle = await victimLatency(tessera, echo, VICTIM_MS)
    progress(`victim, while ${HOSTILE_CALLS} hostile calls spin`)
    const stop = { done: false }
    const busy = keepBusy(tessera.url, spin, HOSTILE_CALLS, stop)
    // Let the hostile tenant reach its cap and fill its queue first.
    await new Promise((r) => setTimeout(r, 1000))
    const underAttack = await victimLatency(tessera, echo, VICTIM_MS)
    stop.done = true
    const hostileStatuses = Object.fromEntries(await busy)

    progress(`overload: ${RATE} calls/s for ${OVERLOAD_MS / 1000} s`)
    const busyVictim = react(await reactor(tessera.url, victim.admin, BUSY_20MS), victim.caller)
    const load = await overload(tessera.url, busyVictim)

    const result = { date: new Date().toISOString(), backend: backend.name, machine: machineInfo(), deadlineMs: DEADLINE_MS, idle, underAttack, hostileStatuses, overload: { rate: RATE, ...load } }
    const day = result.date.slice(0, 10)
    const lines = [
      `# Reactor fairness, ${day}`,
      '',
      machineLine(result.machine),
      '',
      `Backend: ${backend.name}. Reactor deadline ${DEADLINE_MS} ms, default caps (per Reactor 8, per tenant 16, total 32; slow calls of a tenant (of Reactors not run yet or whose last call took over 250 ms, and calls running longer) at most ${SLOW_CAP} at once (half the cores); queue 64 per tenant, 256 in all, 1 s).`,
      '',
      markdownTable(['victim (tenant B, warm echo, c=1)', 'p50 µs', 'p99 µs', 'requests'], [
        ['idle', idle.p50Us, idle.p99Us, idle.requests],
        [`${HOSTILE_CALLS} hostile calls of tenant A spinning`, underAttack.p50Us, underAttack.p99Us, underAttack.requests],
      ]),
      '',
      `Hostile tenant's answers: ${JSON.stringify(hostileStatuses)} (504: ran to the deadline; 503: shed).`,
      '',
      markdownTable(['overload (20 ms CPU Reactor)', 'offered', 'answers by status', 'p99 ms', 'slowest ms', `within ${DEADLINE_MS} ms`], [
        [`${RATE} calls/s, ${OVERLOAD_MS / 1000} s`, load.offered, JSON.stringify(load.statuses), load.p99Ms, load.slowestMs, load.slowestMs < DEADLINE_MS ? 'yes' : '**no**'],
      ]),
      '',
    ]
    const out = path.join(ROOT, 'bench/results', `${day}-fairness`)
    await mkdir(path.dirname(out), { recursive: true })
    await writeFile(`${out}.md`, lines.join('\n'))
    await writeFile(`${out}.json`, JSON.stringify(result, null, 2) + '\n')
    process.stdout.write(lines.join('\n') + '\n')
  } finally {
    await tessera.stop()
    await backend.drop()
  }
}

await main()
