/**
 * Vault throughput and latency (issue 3): create (`POST /tokens`), read (`GET /tokens/{id}`) and
 * detokenize (`POST /detokenize` with one expression) at concurrency 1 and 32, against real
 * Postgres and against PGlite in one run. Each backend is its own Tessera process pinned to
 * core 0; the cells (backend x operation x concurrency) are interleaved round by round.
 * Every request is timed by the bench (hrtime) on a keep-alive undici pool of `concurrency`
 * connections; throughput is completed requests over the wall time of the cell.
 *
 *   npx tsx bench/tokens.ts   (DATABASE_URL, default the local Postgres; REDIS_URL optional)
 */
import { dirname, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { createCardTokens, createPrivateApp } from './lib/api.js'
import { closedLoop, interleave, median, percentileUs, progress, round0, round1, type BenchRequest } from './lib/measure.js'
import { machineInfo, measureCpu, pinSelf } from './lib/proc.js'
import { createBackend, serverVersion, startTessera, type Backend, type TesseraProcess } from './lib/tessera.js'
import { writeResult } from './lib/write-result.js'

export interface TokensBenchOptions {
  /** Unset: PGlite only. */
  databaseUrl?: string
  redisUrl?: string
  rounds?: number
  /** Timed requests at concurrency 1 per cell per round (capped at `durationS`). */
  latencyRequests?: number
  /** Seconds per cell per round at concurrency 32. */
  durationS?: number
  concurrency?: number
  outFile?: string | null
}

export interface TokensCellResult {
  backend: string
  operation: string
  concurrency: number
  rps: number
  p50Us: number
  p99Us: number
  cpuUsPerRequest: number
}

export interface TokensBenchResult {
  date: string
  machine: ReturnType<typeof machineInfo>
  backends: Record<string, string>
  options: Required<Omit<TokensBenchOptions, 'databaseUrl' | 'redisUrl' | 'outFile'>>
  cells: TokensCellResult[]
  notes: string[]
}

interface Cell {
  backend: string
  operation: string
  concurrency: number
  origin: string
  pid: number
  request: () => BenchRequest
  rps: number[]
  p50: number[]
  p99: number[]
  cpu: number[]
}

const DEFAULT_OUT = resolve(dirname(fileURLToPath(import.meta.url)), 'results/tokens-latest.json')
const OPERATIONS = ['create', 'read', 'detokenize'] as const

function requests(key: string, ids: string[]): Record<(typeof OPERATIONS)[number], () => BenchRequest> {
  const json = { 'SVC-API-KEY': key, 'content-type': 'application/json' }
  const create = JSON.stringify({ type: 'card_number', data: '4242424242424242' })
  let i = 0
  const next = () => ids[i++ % ids.length]!
  return {
    create: () => ({ method: 'POST', path: '/tokens', headers: json, body: create }),
    read: () => ({ method: 'GET', path: `/tokens/${next()}`, headers: { 'SVC-API-KEY': key } }),
    detokenize: () => ({ method: 'POST', path: '/detokenize', headers: json, body: JSON.stringify({ card: `{{${next()}}}` }) }),
  }
}

async function setUp(backend: Backend, concurrencies: number[]): Promise<{ t: TesseraProcess; cells: Cell[] }> {
  const t = await startTessera(backend)
  const app = await createPrivateApp(t.url, backend.adminKey)
  const ids = await createCardTokens(t.url, app.key, 200)
  const reqs = requests(app.key, ids)
  const cells = OPERATIONS.flatMap((operation) => concurrencies.map((concurrency): Cell => ({
    backend: backend.name, operation, concurrency, origin: t.url, pid: t.pid, request: reqs[operation], rps: [], p50: [], p99: [], cpu: [],
  })))
  return { t, cells }
}

export async function runTokensBench(options: TokensBenchOptions = {}): Promise<TokensBenchResult> {
  const o = { rounds: options.rounds ?? 3, latencyRequests: options.latencyRequests ?? 1000, durationS: options.durationS ?? 3, concurrency: options.concurrency ?? 32 }
  const notes = [pinSelf(), 'PGlite runs inside the Tessera process, so its CPU figure includes the database; Postgres runs outside it.']
  const backends: Backend[] = []
  const processes: TesseraProcess[] = []
  const info: Record<string, string> = {}
  try {
    if (options.databaseUrl) {
      backends.push(await createBackend('postgres', options))
      info.postgres = `PostgreSQL ${await serverVersion(options.databaseUrl)}`
    } else notes.push('postgres skipped: no DATABASE_URL')
    backends.push(await createBackend('pglite', options))
    info.pglite = 'PGlite (embedded, temporary directory)'
    const cells: Cell[] = []
    for (const backend of backends) {
      progress(`tokens: starting Tessera on ${backend.name}`)
      const set = await setUp(backend, [1, o.concurrency])
      processes.push(set.t)
      cells.push(...set.cells)
    }
    for (const c of cells.filter((c) => c.concurrency > 1)) {
      progress(`tokens: warm-up ${c.backend} ${c.operation}`)
      await closedLoop(c.origin, c.request, { concurrency: c.concurrency, durationMs: 1000 })
    }
    await interleave(o.rounds, cells, async (c, round) => {
      progress(`tokens: round ${round + 1}/${o.rounds} ${c.backend} ${c.operation} c=${c.concurrency}`)
      const bound = c.concurrency === 1 ? { requests: o.latencyRequests, durationMs: o.durationS * 1000 } : { durationMs: o.durationS * 1000 }
      const { result, cpuUs } = await measureCpu([c.pid], () => closedLoop(c.origin, c.request, { concurrency: c.concurrency, ...bound }))
      c.rps.push(result.requests / result.durationS)
      c.p50.push(percentileUs(result.samplesNs, 50))
      c.p99.push(percentileUs(result.samplesNs, 99))
      c.cpu.push(cpuUs / Math.max(1, result.requests))
    })
    const result: TokensBenchResult = {
      date: new Date().toISOString(),
      machine: machineInfo(),
      backends: info,
      options: o,
      cells: cells.map((c) => ({ backend: c.backend, operation: c.operation, concurrency: c.concurrency, rps: round0(median(c.rps)), p50Us: round1(median(c.p50)), p99Us: round1(median(c.p99)), cpuUsPerRequest: round1(median(c.cpu)) })),
      notes,
    }
    await writeResult(options.outFile, DEFAULT_OUT, result)
    return result
  } finally {
    for (const p of processes) await p.stop()
    for (const b of backends) await b.drop()
  }
}

/** One row per backend and operation, both concurrencies side by side. */
export function tokensTable(result: TokensBenchResult): Record<string, string | number>[] {
  const c = result.options.concurrency
  const rows: Record<string, string | number>[] = []
  for (const backend of Object.keys(result.backends)) {
    for (const operation of OPERATIONS) {
      const at = (n: number) => result.cells.find((x) => x.backend === backend && x.operation === operation && x.concurrency === n)
      const one = at(1)
      const many = at(c)
      if (!one || !many) continue
      rows.push({
        backend, operation,
        'req/s c=1': one.rps, 'p50 µs c=1': one.p50Us, 'p99 µs c=1': one.p99Us,
        [`req/s c=${c}`]: many.rps, [`p50 µs c=${c}`]: many.p50Us, [`p99 µs c=${c}`]: many.p99Us,
        [`CPU µs/req c=${c}`]: many.cpuUsPerRequest,
      })
    }
  }
  return rows
}

export function printTokensBench(result: TokensBenchResult): void {
  const o = result.options
  console.log(`tokens, ${o.rounds} rounds: c=1 up to ${o.latencyRequests} requests, c=${o.concurrency} for ${o.durationS} s; ${Object.values(result.backends).join(', ')}; medians`)
  console.table(tokensTable(result))
  for (const note of result.notes) console.log(note)
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  const databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
  printTokensBench(await runTokensBench({ databaseUrl, redisUrl: process.env.REDIS_URL }))
}
