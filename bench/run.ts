/**
 * `npm run bench`: every benchmark in one run, then the report. Real Postgres and Redis when
 * DATABASE_URL / REDIS_URL are set, the embedded defaults otherwise; all traffic stays on
 * 127.0.0.1. Writes bench/results/<date>.md, <date>.json and <date>-proxy.svg, and points
 * bench/README.md at them.
 */
import { existsSync } from 'node:fs'
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { progress } from './lib/measure.js'
import { idleProbe, machineInfo, pinSelf, type IdleProbe } from './lib/proc.js'
import { figure, machineLine, rowsToMarkdown, summaryTable, type Figure } from './lib/report.js'
import { proxyChart } from './lib/svg.js'
import { buildTessera, serverVersion } from './lib/tessera.js'
import { printProxyBench, proxyTable, runProxyBench, type ProxyBenchResult } from './proxy.js'
import { printRateLimitBench, runRateLimitBench, type RateLimitBenchResult } from './ratelimit.js'
import { printTokensBench, runTokensBench, tokensTable, type TokensBenchResult } from './tokens.js'

/** What `bench/reactors.ts` (issue 5) is expected to export; every field optional. */
interface ReactorsModule {
  runReactorsBench(options: { databaseUrl?: string; redisUrl?: string; outFile?: string | null }): Promise<{ figures?: Figure[]; table?: Record<string, string | number>[]; notes?: string[] }>
}

const HERE = path.dirname(fileURLToPath(import.meta.url))
const BUDGET_MS = 9 * 60_000
const startedAt = Date.now()
const databaseUrl = process.env.DATABASE_URL
const redisUrl = process.env.REDIS_URL
const pinning = pinSelf()
const notes: string[] = []
const machineStart = machineInfo()
const idle: { start: IdleProbe; end?: IdleProbe } = { start: await idleProbe() }
let failed = false

/** Runs one phase; a failure is reported and the run goes on, so the other figures still land. */
async function phase<T>(name: string, fn: () => Promise<T>): Promise<T | undefined> {
  if (Date.now() - startedAt > BUDGET_MS) {
    notes.push(`${name}: skipped, the 9-minute budget was spent`)
    return undefined
  }
  const t0 = Date.now()
  progress(`== ${name}`)
  try {
    const result = await fn()
    progress(`== ${name} done in ${Math.round((Date.now() - t0) / 1000)} s`)
    return result
  } catch (err) {
    failed = true
    notes.push(`${name}: FAILED: ${(err as Error).message.split('\n')[0]}`)
    progress(`== ${name} FAILED: ${(err as Error).stack ?? String(err)}`)
    return undefined
  }
}

function rateLimitFigures(r: RateLimitBenchResult): Figure[] {
  const base = r.variants.find((v) => v.variant === 'baseline')
  return r.variants.filter((v) => v !== base && base).map((v) => figure({
    bench: 'rate limit', name: `${v.variant} store, p50 at c=1`, unit: 'µs', tessera: v.p50Us, baseline: base!.p50Us, baselineName: 'no limiter', added: v.addedP50Us,
    cpuUs: v.cpuUsPerRequest, baselineCpuUs: base!.cpuUsPerRequest,
    ...(v.variant === 'redis' ? { target: '≤ +100 µs', pass: v.addedP50Us <= 100 } : {}),
  }))
}

async function runReactors(): Promise<{ figures?: Figure[]; table?: Record<string, string | number>[]; notes?: string[] } | undefined> {
  const file = path.join(HERE, 'reactors.ts')
  if (!existsSync(file)) {
    notes.push('reactors: skipped, bench/reactors.ts does not exist yet (issue 5)')
    return undefined
  }
  const mod = (await import(`file://${file}`)) as Partial<ReactorsModule>
  if (typeof mod.runReactorsBench !== 'function') throw new Error('bench/reactors.ts does not export runReactorsBench')
  return mod.runReactorsBench({ databaseUrl, redisUrl, outFile: null })
}

async function backendLabel(): Promise<string> {
  const db = databaseUrl ? `PostgreSQL ${await serverVersion(databaseUrl).catch(() => '?')}` : 'PGlite (embedded)'
  return `${db}; rate windows in ${redisUrl ? 'Redis' : 'process'}`
}

function machineLines(backend: string): string[] {
  const m = machineInfo()
  return [
    `- CPU: ${m.cpu}, ${m.cores} cores; ${m.memoryGb} GB RAM; ${m.os}`,
    `- Node ${m.node}; backend: ${backend}`,
    `- Pinning: ${pinning}; Postgres and Redis unpinned`,
    `- Load average (1/5/15 min) at start ${machineStart.loadAverage.join(' / ')}, at end ${m.loadAverage.join(' / ')}`,
    `- Idle probe (driver core, medians): a short computation took ${idle.start.busyUs} µs back to back and ${idle.start.afterIdleUs} µs right after 1 ms of idle at start${idle.end ? `, ${idle.end.busyUs} and ${idle.end.afterIdleUs} µs at end` : ''}; every step of a c=1 request, which follows an idle gap, pays about that factor`,
  ]
}

function renderMarkdown(date: string, backend: string, figures: Figure[], proxy?: ProxyBenchResult, tokens?: TokensBenchResult, rl?: RateLimitBenchResult, reactors?: { table?: Record<string, string | number>[]; notes?: string[] }): string {
  const seconds = Math.round((Date.now() - startedAt) / 1000)
  const parts = [
    `# Tessera benchmark results, ${date}`,
    '',
    `\`npm run bench\`, ${new Date(startedAt).toISOString()}, ${seconds} s in all. Medians over interleaved repetitions; latency timed per request (hrtime) at concurrency 1.`,
    '',
    ...machineLines(backend),
    '',
    '## Summary',
    '',
    summaryTable(figures),
  ]
  if (proxy) {
    const o = proxy.options
    parts.push('', '## Proxy (issue 4)', '', `1 KB JSON body; autocannon ${o.connections} connections × ${o.durationS} s per variant per round, ${o.latencyRequests} requests at c=1, ${o.rounds} rounds. CPU µs/req is the process under test: the destination for (a), the forwarder for (b), Tessera and its Reactor runtime child for the rest; stores CPU µs/req is the Postgres and Redis processes on the machine over the same runs (with PGlite the database is inside Tessera).`, '', `![proxy chart](./${date}-proxy.svg)`, '', rowsToMarkdown(proxyTable(proxy)), '', `Measured on ${machineLine(proxy.machine)} (at the end of the proxy phase).`)
    if (proxy.scaling) parts.push('', `Scaling, variant (c), ${proxy.scaling.connections} connections: 1 process ${proxy.scaling.oneRps} req/s (${proxy.scaling.oneCpuUsPerRequest} CPU µs/req), 2 processes ${proxy.scaling.twoRps} req/s (${proxy.scaling.twoCpuUsPerRequest} CPU µs/req) = ${proxy.scaling.ratio}×.`)
    parts.push('', ...proxy.notes.filter((n) => n !== pinning).map((n) => `- ${n}`))
  }
  if (tokens) {
    parts.push('', '## Tokens (issue 3)', '', `c=1: up to ${tokens.options.latencyRequests} requests; c=${tokens.options.concurrency}: ${tokens.options.durationS} s; ${tokens.options.rounds} rounds; backends: ${Object.values(tokens.backends).join(', ')}.`, '', rowsToMarkdown(tokensTable(tokens)), '', ...tokens.notes.filter((n) => n !== pinning).map((n) => `- ${n}`))
  }
  if (rl) {
    parts.push('', '## Rate limiter (issue 7)', '', `In the driver process: the same no-op Koa route without the limiter, with the in-process store and with Redis; ${rl.options.rounds} rounds × ${rl.options.requests} requests at c=1.`, '')
    parts.push(rowsToMarkdown(rl.variants.map((v) => ({ variant: v.variant, 'p50 µs': v.p50Us, 'p99 µs': v.p99Us, 'added p50 µs': v.addedP50Us, 'added p99 µs': v.addedP99Us, 'CPU µs/req': v.cpuUsPerRequest }))))
  }
  parts.push('', '## Reactors (issue 5)', '', reactors?.table ? rowsToMarkdown(reactors.table) : 'Not measured in this run (see notes).')
  parts.push('', '## Notes', '', ...[...notes, ...(reactors?.notes ?? [])].map((n) => `- ${n}`), '')
  return parts.join('\n')
}

/** Rewrites the block between the markers in bench/README.md: machine and link to the newest results. */
async function pointReadme(date: string, backend: string): Promise<void> {
  const file = path.join(HERE, 'README.md')
  if (!existsSync(file)) return
  const text = await readFile(file, 'utf8')
  const block = ['<!-- latest:start -->', `Newest results: [results/${date}.md](results/${date}.md) ([JSON](results/${date}.json), [chart](results/${date}-proxy.svg)), measured on:`, '', ...machineLines(backend), '<!-- latest:end -->'].join('\n')
  const next = text.replace(/<!-- latest:start -->[\s\S]*<!-- latest:end -->/, block)
  if (next !== text) await writeFile(file, next)
}

progress(`bench: ${databaseUrl ? 'Postgres' : 'PGlite'}, ${redisUrl ? 'Redis' : 'in-process windows'}; ${pinning}`)
await phase('build (tsc -p tsconfig.build.json)', buildTessera)
const proxy = await phase('proxy', () => runProxyBench({ databaseUrl, redisUrl, outFile: null }))
if (proxy) printProxyBench(proxy)
const tokens = await phase('tokens', () => runTokensBench({ databaseUrl, redisUrl, outFile: null }))
if (tokens) printTokensBench(tokens)
const rl = await phase('rate limit', () => runRateLimitBench({ redisUrl, outFile: null }))
if (rl) printRateLimitBench(rl)
const reactors = await phase('reactors', runReactors)

idle.end = await idleProbe()
const backend = await backendLabel()
const figures = [...(proxy?.figures ?? []), ...(rl ? rateLimitFigures(rl) : []), ...(reactors?.figures ?? [])]
const date = new Date(startedAt).toISOString().slice(0, 10)
const dir = path.join(HERE, 'results')
await mkdir(dir, { recursive: true })
await writeFile(path.join(dir, `${date}.md`), renderMarkdown(date, backend, figures, proxy, tokens, rl, reactors))
await writeFile(path.join(dir, `${date}.json`), JSON.stringify({ date: new Date(startedAt).toISOString(), durationS: Math.round((Date.now() - startedAt) / 1000), machine: machineInfo(), machineAtStart: machineStart, idleProbe: idle, backend, figures, proxy, tokens, rateLimit: rl, reactors, notes }, null, 2) + '\n')
if (proxy) await writeFile(path.join(dir, `${date}-proxy.svg`), proxyChart(proxy.variants, `${backend}; ${machineStart.cpu}, ${machineStart.cores} cores, Node ${machineStart.node}; ${date}`))
await pointReadme(date, backend)
console.log(summaryTable(figures))
for (const n of notes) console.log(`- ${n}`)
progress(`wrote bench/results/${date}.md, .json${proxy ? ', -proxy.svg' : ''} in ${Math.round((Date.now() - startedAt) / 1000)} s`)
process.exit(failed ? 1 : 0)
