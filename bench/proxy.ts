/**
 * The proxy's cost (issue 4), on loopback with a 1 KB JSON body, every variant in one run:
 * (a) direct to the destination, (b) the cheapest correct forwarder (the baseline, bench/lib/forwarder.ts),
 * (k) the same forwarder on Koa, Tessera's HTTP stack (bench/lib/koa-forwarder.ts: the stack's share), (c) Tessera
 * `/proxy` without tokens, (d) with 1 token, (e) with 10 tokens, (f) a pre-configured proxy
 * with trivial transforms when `POST /proxies` exists (issue 6). Tessera and the forwarders run
 * pinned to core 0; autocannon, the latency client and the destination on core 1. Plus the
 * scaling figure (issue 8): variant (c) on one and on two Tessera processes sharing the stores.
 * The audit log's cost (issue 16): (g) is (d) on a second Tessera with SVC_AUDIT_ENABLED=false
 * (Postgres only: PGlite is one process), and (d) must keep >= 0.9x of (g)'s throughput.
 *
 *   npx tsx bench/proxy.ts   (DATABASE_URL / REDIS_URL, default the local Postgres and Redis)
 */
import { dirname, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { call, createCardTokens, createPrivateApp } from './lib/api.js'
import { startHelper, type HelperProcess } from './lib/helpers.js'
import { closedLoop, interleave, median, percentileUs, progress, round0, round1, saturate, type BenchRequest } from './lib/measure.js'
import { DRIVER_CORE, localStorePids, machineInfo, measureCpu, measureCpuOf, pinSelf, SUT_CORE } from './lib/proc.js'
import { figure, machineLine, roundRange, roundsText, type Figure } from './lib/report.js'
import { benchTesseraEnv, createBackend, startTessera, type Backend, type TesseraProcess } from './lib/tessera.js'
import { writeResult } from './lib/write-result.js'

export interface ProxyBenchOptions {
  databaseUrl?: string
  redisUrl?: string
  rounds?: number
  /** Seconds of autocannon per variant per round. */
  durationS?: number
  connections?: number
  /** Timed requests at concurrency 1 per variant per round. */
  latencyRequests?: number
  warmupS?: number
  scaling?: boolean
  /** Variants to measure besides the baseline (b), e.g. ['c', 'f']; all by default. */
  only?: string[]
  outFile?: string | null
}

export interface ProxyVariantResult {
  variant: string
  label: string
  rps: number
  cpuUsPerRequest: number
  p50Us: number
  p99Us: number
  rpsRatioToB: number
  /** CPU µs/req over the forwarder's: the cost ratio, beside the throughput ratio. */
  cpuRatioToB: number
  /**
   * CPU µs/req of the Postgres and Redis processes on this machine over the same run: the
   * database work a request causes (the audit log's inserts), which shares the machine's two
   * cores with Tessera and the driver but is not in `cpuUsPerRequest`. PGlite runs inside Tessera.
   */
  storesCpuUsPerRequest: number
  addedP50UsOverB: number
  addedP99UsOverB: number
  errors: number
  /** Each round's figures, in round order (the variants were measured interleaved, one per round each). */
  rounds: { rps: number[]; cpuUsPerRequest: number[]; storesCpuUsPerRequest: number[]; p50Us: number[] }
}

export interface ProxyBenchResult {
  date: string
  machine: ReturnType<typeof machineInfo>
  backend: { database: string; redis: string }
  options: Required<Omit<ProxyBenchOptions, 'databaseUrl' | 'redisUrl' | 'outFile' | 'only'>>
  variants: ProxyVariantResult[]
  scaling?: { connections: number; oneRps: number; twoRps: number; ratio: number; oneCpuUsPerRequest: number; twoCpuUsPerRequest: number }
  figures: Figure[]
  notes: string[]
}

interface Variant {
  key: string
  label: string
  url: string
  pids: number[]
  request: BenchRequest
  rps: number[]
  cpu: number[]
  stores: number[]
  p50: number[]
  p99: number[]
  errors: number
}

const SETTLE_MS = 1000
const DEFAULT_OUT = resolve(dirname(fileURLToPath(import.meta.url)), 'results/proxy-latest.json')
const REQUEST_TRANSFORM = 'module.exports = async function (req) { return { body: req.args.body, headers: req.args.headers } }'
const RESPONSE_TRANSFORM = 'module.exports = async function (req) { return { body: req.args.body, headers: req.args.headers, status: req.args.status } }'

/** A 1024-byte JSON payment request whose `cards` hold the given expressions. */
export function proxyBody(tokenIds: string[]): string {
  const doc = { amount: 4200, currency: 'usd', customer: { name: 'Ada Lovelace', email: 'ada@example.com' }, cards: tokenIds.map((id) => `{{${id}}}`), pad: '' }
  const length = Buffer.byteLength(JSON.stringify(doc))
  if (length > 1024) throw new Error(`proxy body is ${length} bytes`)
  doc.pad = 'x'.repeat(1024 - length)
  return JSON.stringify(doc)
}

function variant(key: string, label: string, url: string, pids: number[], headers: Record<string, string>, body: string): Variant {
  const request: BenchRequest = { method: 'POST', path: new URL(url).pathname, headers: { 'content-type': 'application/json', ...headers }, body }
  return { key, label, url, pids, request, rps: [], cpu: [], stores: [], p50: [], p99: [], errors: 0 }
}

/** One request through each variant before timing: it must answer 200 and, with tokens, carry the plaintext. */
async function check(v: Variant, expectedBytes: number): Promise<void> {
  const res = await fetch(v.url, { method: 'POST', headers: v.request.headers, body: v.request.body })
  const text = await res.text()
  if (res.status !== 200) throw new Error(`variant ${v.key}: status ${res.status} ${text.slice(0, 300)}`)
  const received = Number(res.headers.get('x-received-bytes'))
  if (received !== expectedBytes) throw new Error(`variant ${v.key}: destination received ${received} bytes, expected ${expectedBytes}`)
}

/** (f) when the pre-configured proxies API exists; undefined (and a note) otherwise. */
async function preconfigured(t: TesseraProcess, backend: Backend, app: { id: string; key: string }, destUrl: string, body: string, notes: string[]): Promise<Variant | undefined> {
  const res = await call(t.url, backend.adminKey, 'POST', '/proxies', {
    name: 'bench', destination_url: destUrl, request_transform: { code: REQUEST_TRANSFORM }, response_transform: { code: RESPONSE_TRANSFORM }, application: { id: app.id },
  }).catch((err: Error) => ({ status: 0, body: err.message }))
  if (res.status !== 201 || typeof res.body?.key !== 'string') {
    notes.push(`(f) pre-configured proxy skipped: POST /proxies answered ${res.status} (issue 6 not merged yet?)`)
    return undefined
  }
  const v = variant('f', 'pre-configured, trivial transforms', `${t.url}/proxy`, [t.pid], { 'SVC-API-KEY': app.key, 'SVC-PROXY-KEY': res.body.key }, body)
  try {
    await check(v, Buffer.byteLength(body))
    return v
  } catch (err) {
    notes.push(`(f) pre-configured proxy skipped: ${(err as Error).message}`)
    return undefined
  }
}

async function measure(variants: Variant[], o: Required<Omit<ProxyBenchOptions, 'databaseUrl' | 'redisUrl' | 'outFile' | 'only'>>): Promise<void> {
  for (const v of variants) {
    progress(`proxy: warm-up ${v.key}`)
    await closedLoop(new URL(v.url).origin, v.request, { concurrency: o.connections, durationMs: o.warmupS * 1000 })
  }
  await interleave(o.rounds, variants, async (v, round) => {
    progress(`proxy: round ${round + 1}/${o.rounds} variant ${v.key} (${v.label})`)
    // Untimed, right before the timed run: the variant measured first after another kind of load
    // (the transforms of (f), the idle process while (a) and (b) ran) otherwise pays for
    // re-optimizing and re-growing the heap, which made (c) look dearer than (d) (issue 15).
    await closedLoop(new URL(v.url).origin, v.request, { concurrency: o.connections, durationMs: SETTLE_MS })
    const stores = await measureCpuOf(localStorePids(), () => measureCpu(v.pids, () => saturate([v.url], v.request, { connections: o.connections, durationS: o.durationS })))
    const { result, cpuUs } = stores.result
    v.rps.push(result.rps)
    v.cpu.push(cpuUs / Math.max(1, result.requests))
    v.stores.push(stores.cpuUs / Math.max(1, result.requests))
    v.errors += result.errors
    const lat = await closedLoop(new URL(v.url).origin, v.request, { concurrency: 1, requests: o.latencyRequests })
    v.p50.push(percentileUs(lat.samplesNs, 50))
    v.p99.push(percentileUs(lat.samplesNs, 99))
  })
}

function summarize(variants: Variant[]): ProxyVariantResult[] {
  const b = variants.find((v) => v.key === 'b')!
  const [bRps, bP50, bP99] = [median(b.rps), median(b.p50), median(b.p99)]
  return variants.map((v) => ({
    variant: v.key,
    label: v.label,
    rps: round0(median(v.rps)),
    cpuUsPerRequest: round1(median(v.cpu)),
    p50Us: round1(median(v.p50)),
    p99Us: round1(median(v.p99)),
    rpsRatioToB: Math.round((median(v.rps) / bRps) * 100) / 100,
    cpuRatioToB: Math.round((median(v.cpu) / median(b.cpu)) * 100) / 100,
    storesCpuUsPerRequest: round1(median(v.stores)),
    addedP50UsOverB: round1(median(v.p50) - bP50),
    addedP99UsOverB: round1(median(v.p99) - bP99),
    errors: v.errors,
    rounds: { rps: v.rps.map(round0), cpuUsPerRequest: v.cpu.map(round1), storesCpuUsPerRequest: v.stores.map(round1), p50Us: v.p50.map(round1) },
  }))
}

/** Variant (c) against one Tessera, then round-robin by connection over two (the second on the driver core). */
async function scaling(first: TesseraProcess, backend: Backend, request: BenchRequest, o: { rounds: number; durationS: number; connections: number }) {
  progress('proxy: scaling, starting a second Tessera process on the same Postgres and Redis')
  const second = await startTessera(backend, { core: DRIVER_CORE })
  try {
    const connections = o.connections * 2
    const setups = [{ n: 1, urls: [`${first.url}/proxy`], pids: [first.pid], rps: [] as number[], cpu: [] as number[] },
      { n: 2, urls: [`${first.url}/proxy`, `${second.url}/proxy`], pids: [first.pid, second.pid], rps: [] as number[], cpu: [] as number[] }]
    await closedLoop(second.url, request, { concurrency: 8, durationMs: 2000 })
    await interleave(o.rounds, setups, async (s, round) => {
      progress(`proxy: scaling round ${round + 1}/${o.rounds}, ${s.n} process(es)`)
      const { result, cpuUs } = await measureCpu(s.pids, () => saturate(s.urls, request, { connections, durationS: o.durationS }))
      if (result.errors) throw new Error(`scaling with ${s.n} processes: ${result.errors} errors`)
      s.rps.push(result.rps)
      s.cpu.push(cpuUs / Math.max(1, result.requests))
    })
    const [one, two] = setups.map((s) => ({ rps: median(s.rps), cpu: median(s.cpu) }))
    return { connections, oneRps: round0(one!.rps), twoRps: round0(two!.rps), ratio: Math.round((two!.rps / one!.rps) * 100) / 100, oneCpuUsPerRequest: round1(one!.cpu), twoCpuUsPerRequest: round1(two!.cpu) }
  } finally {
    await second.stop()
  }
}

const ratioRange = (v: ProxyVariantResult, base: ProxyVariantResult) => roundRange(v.rounds.rps, base.rounds.rps, (x, y) => x / y, 2)

function figures(result: ProxyBenchResult): Figure[] {
  const by = (k: string) => result.variants.find((v) => v.variant === k)
  const b = by('b')!
  const out: Figure[] = []
  // CPU µs/req at saturation of the variant and of the forwarder, beside every ratio.
  const cpu = (v: ProxyVariantResult) => ({ cpuUs: v.cpuUsPerRequest, baselineCpuUs: b.cpuUsPerRequest })
  const rps = (k: string, name: string, min?: number) => {
    const v = by(k)
    if (v) out.push(figure({ bench: 'proxy', name, unit: 'req/s', tessera: v.rps, baseline: b.rps, baselineName: 'b', range: ratioRange(v, b), ...cpu(v), target: min ? `≥ ${min}× b` : undefined, pass: min ? v.rps >= min * b.rps : undefined }))
  }
  const p50 = (k: string, name: string, maxAdded: number) => {
    const v = by(k)
    if (v) out.push(figure({ bench: 'proxy', name, unit: 'µs', tessera: v.p50Us, baseline: b.p50Us, baselineName: 'b', added: v.addedP50UsOverB, range: roundRange(v.rounds.p50Us, b.rounds.p50Us, (x, y) => x - y, 0), ...cpu(v), target: `≤ +${maxAdded} µs`, pass: v.addedP50UsOverB <= maxAdded }))
  }
  // Issue 15's targets, and (k): what Koa alone costs over (b), no target.
  rps('k', '(k) the forwarder on Koa, throughput')
  rps('c', '(c) no tokens, throughput', 0.45)
  rps('d', '(d) 1 token, throughput')
  rps('e', '(e) 10 tokens, throughput', 0.35)
  p50('c', '(c) no tokens, p50 at c=1', 150)
  p50('e', '(e) 10 tokens, p50 at c=1', 350)
  // CPU per request is the cost measure least disturbed by other load on a shared machine.
  for (const v of ['c', 'e'].map(by)) if (v) out.push(figure({ bench: 'proxy', name: `(${v.variant}) CPU per request`, unit: 'µs', tessera: v.cpuUsPerRequest, baseline: b.cpuUsPerRequest, baselineName: 'b', added: round1(v.cpuUsPerRequest - b.cpuUsPerRequest) }))
  const c = by('c')
  const f = by('f')
  // Issue 15: trivial request + response transforms at 32 connections, against (c).
  if (f && c) {
    out.push(figure({ bench: 'proxy', name: '(f) pre-configured, trivial transforms, throughput', unit: 'req/s', tessera: f.rps, baseline: c.rps, baselineName: 'c', range: ratioRange(f, c), cpuUs: f.cpuUsPerRequest, baselineCpuUs: c.cpuUsPerRequest, target: '≥ 0.4× c', pass: f.rps >= 0.4 * c.rps }))
    out.push(figure({ bench: 'proxy', name: '(f) pre-configured, p50 at c=1', unit: 'µs', tessera: f.p50Us, baseline: c.p50Us, baselineName: 'c', added: round1(f.p50Us - c.p50Us), cpuUs: f.cpuUsPerRequest, baselineCpuUs: c.cpuUsPerRequest }))
  }
  if (result.scaling) {
    const s = result.scaling
    out.push(figure({ bench: 'proxy', name: 'scaling: (c) on 2 processes', unit: 'req/s', tessera: s.twoRps, baseline: s.oneRps, baselineName: '1 process', cpuUs: s.twoCpuUsPerRequest, baselineCpuUs: s.oneCpuUsPerRequest }))
  }
  // Issue 16: the proxy with the audit log (d) against the same calls without it (g).
  const d = by('d')
  const g = by('g')
  if (d && g) out.push(figure({ bench: 'proxy', name: '(d) 1 token with the audit log, throughput', unit: 'req/s', tessera: d.rps, baseline: g.rps, baselineName: 'g (log off)', range: ratioRange(d, g), cpuUs: d.cpuUsPerRequest, baselineCpuUs: g.cpuUsPerRequest, target: '≥ 0.9× g', pass: d.rps >= 0.9 * g.rps }))
  return out
}

export async function runProxyBench(options: ProxyBenchOptions = {}): Promise<ProxyBenchResult> {
  const only = options.only
  const o = { rounds: options.rounds ?? 3, durationS: options.durationS ?? 4, connections: options.connections ?? 32, latencyRequests: options.latencyRequests ?? 1000, warmupS: options.warmupS ?? 2, scaling: options.scaling ?? only === undefined }
  const wanted = (key: string) => key === 'b' || only === undefined || only.includes(key)
  const notes: string[] = [pinSelf(), ...(Object.keys(benchTesseraEnv).length ? [`diagnosis, not a result: every Tessera started with BENCH_TESSERA_ENV ${JSON.stringify(benchTesseraEnv)}`] : [])]
  const backend = await createBackend(options.databaseUrl ? 'postgres' : 'pglite', options)
  const started: { stop(): Promise<void> }[] = []
  try {
    progress(`proxy: starting destination, forwarder and Tessera (${backend.name}${options.redisUrl ? ' + Redis' : ''})`)
    const dest: HelperProcess = await startHelper('destination', DRIVER_CORE)
    started.push(dest)
    const fwd = await startHelper('forwarder', SUT_CORE)
    started.push(fwd)
    const koa = await startHelper('koa-forwarder', SUT_CORE)
    started.push(koa)
    const t = await startTessera(backend)
    started.push(t)
    const app = await createPrivateApp(t.url, backend.adminKey)
    const ids = await createCardTokens(t.url, app.key, 10)
    const plainBytes = (n: number) => Buffer.byteLength(proxyBody(ids.slice(0, n))) - n * (`"{{${ids[0]}}}"`.length - '"4242424242424242"'.length)
    const proxyHeaders = { 'SVC-PROXY-URL': dest.url, 'SVC-API-KEY': app.key }
    const variants = [
      variant('a', 'direct to destination', `${dest.url}/proxy`, [dest.pid], {}, proxyBody([])),
      variant('b', 'minimal undici forwarder', `${fwd.url}/proxy`, [fwd.pid], proxyHeaders, proxyBody([])),
      variant('k', 'the same forwarder on Koa', `${koa.url}/proxy`, [koa.pid], proxyHeaders, proxyBody([])),
      variant('c', 'Tessera /proxy, no tokens', `${t.url}/proxy`, [t.pid], proxyHeaders, proxyBody([])),
      variant('d', 'Tessera /proxy, 1 token', `${t.url}/proxy`, [t.pid], proxyHeaders, proxyBody(ids.slice(0, 1))),
      variant('e', 'Tessera /proxy, 10 tokens', `${t.url}/proxy`, [t.pid], proxyHeaders, proxyBody(ids)),
    ]
    const tokensOf: Record<string, number> = { d: 1, e: 10 }
    for (const v of variants) await check(v, plainBytes(tokensOf[v.key] ?? 0))
    const f = wanted('f') ? await preconfigured(t, backend, app, dest.url, proxyBody([]), notes) : undefined
    if (f) variants.push(f)
    if (wanted('g') && backend.name === 'pglite') notes.push('(g) audit log off skipped: it needs a second process on the same database (Postgres)')
    else if (wanted('g')) {
      // Same core as the first: the variants are measured one at a time, so only one is busy.
      const unaudited = await startTessera(backend, { env: { SVC_AUDIT_ENABLED: 'false' } })
      started.push(unaudited)
      const g = variant('g', 'Tessera /proxy, 1 token, audit log off', `${unaudited.url}/proxy`, [unaudited.pid], proxyHeaders, proxyBody(ids.slice(0, 1)))
      await check(g, plainBytes(1))
      variants.push(g)
    }
    await measure(variants.filter((v) => wanted(v.key)), o)
    const result: ProxyBenchResult = {
      date: new Date().toISOString(),
      machine: machineInfo(),
      backend: { database: backend.name, redis: options.redisUrl ? 'redis' : 'in-process' },
      options: o,
      variants: summarize(variants.filter((v) => wanted(v.key))),
      figures: [],
      notes,
    }
    if (result.variants.some((v) => v.errors)) notes.push('some requests failed during saturation: see `errors`')
    if (o.scaling) {
      result.scaling = await scaling(t, backend, variants.find((v) => v.key === 'c')!.request, o)
      notes.push('scaling: the second process runs on core 1 beside autocannon and the destination; on 2 cores this is a lower bound')
    }
    result.figures = figures(result)
    await writeResult(options.outFile, DEFAULT_OUT, result)
    return result
  } finally {
    for (const s of started.reverse()) await s.stop()
    await backend.drop()
  }
}

export function proxyTable(result: ProxyBenchResult): Record<string, string | number>[] {
  return result.variants.map((v) => ({
    variant: `${v.variant} ${v.label}`,
    'req/s': v.rps,
    '× b': v.rpsRatioToB,
    'CPU µs/req': v.cpuUsPerRequest,
    'CPU × b': v.cpuRatioToB,
    'stores CPU µs/req': v.storesCpuUsPerRequest,
    'p50 µs (c=1)': v.p50Us,
    'p99 µs (c=1)': v.p99Us,
    'p50 over b µs': v.addedP50UsOverB,
    errors: v.errors,
  }))
}

export function printProxyBench(result: ProxyBenchResult): void {
  const o = result.options
  console.log(`proxy, 1 KB JSON, ${o.rounds} rounds: autocannon ${o.connections} connections x ${o.durationS} s, ${o.latencyRequests} requests at c=1; ${result.backend.database} + ${result.backend.redis}; medians`)
  console.log(`machine: ${machineLine(result.machine)}`)
  console.table(proxyTable(result))
  if (result.scaling) console.log(`scaling (c), ${result.scaling.connections} connections: 1 process ${result.scaling.oneRps} req/s, 2 processes ${result.scaling.twoRps} req/s (${result.scaling.ratio}x)`)
  for (const f of result.figures.filter((f) => f.target)) {
    const cpu = f.cpuUs === undefined ? '' : ` (CPU ${f.cpuUs} vs ${f.baselineCpuUs} µs/req)`
    console.log(`${f.name}: ${f.tessera} ${f.unit} vs ${f.baselineName} ${f.baseline} -> ${f.added !== undefined ? `+${f.added} µs` : `${f.ratio}x`}${roundsText(f)}${cpu}, target ${f.target}: ${f.pass ? 'pass' : 'FAIL'}`)
  }
  for (const note of result.notes) console.log(note)
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  const databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
  const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
  // BENCH_PROXY_ONLY=c,f measures those variants (and the baseline b) alone, without the scaling figure.
  const only = process.env.BENCH_PROXY_ONLY?.split(',').map((v) => v.trim()).filter(Boolean)
  printProxyBench(await runProxyBench({ databaseUrl, redisUrl, only }))
}
