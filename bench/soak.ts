/**
 * `npm run bench:soak [-- --duration-s 600 --rate 120]`: a steady mixed load against one Tessera
 * (token create and read, proxy with a token, Reactor calls, Application reads) while the RSS
 * of the API process and of its Reactor runtime child is sampled, to show whether memory levels
 * off. Real Postgres and Redis when DATABASE_URL / REDIS_URL are set, the embedded defaults
 * otherwise. Paced (an open loop at `--rate` requests/s), far below saturation.
 * Writes bench/results/<date>-soak.md and .json.
 */
import { readFileSync } from 'node:fs'
import { mkdir, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { parseArgs } from 'node:util'
import { call, createPrivateApp, createToken } from './lib/api.js'
import { startHelper } from './lib/helpers.js'
import { progress, round1 } from './lib/measure.js'
import { machineInfo } from './lib/proc.js'
import { markdownTable } from './lib/report.js'
import { createBackend, ROOT, startTessera } from './lib/tessera.js'

const { values: args } = parseArgs({ options: { 'duration-s': { type: 'string', default: '600' }, rate: { type: 'string', default: '120' }, 'sample-s': { type: 'string', default: '10' } } })
const durationS = Number(args['duration-s'])
const rate = Number(args.rate)
const sampleS = Number(args['sample-s'])
const WORKERS = 16

interface Sample { t: number; apiMb: number; runtimeMb: number | null; requests: number; errors: number }

/** Resident set size in MB from /proc (Linux), undefined when the process is gone. */
function rssMb(pid: number): number | undefined {
  try {
    const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]
    return kb === undefined ? undefined : Math.round(Number(kb) / 102.4) / 10
  } catch {
    return undefined
  }
}

/** The Reactor runtime is the API process's forked node child. */
function runtimePid(apiPid: number): number | undefined {
  try {
    const kids = readFileSync(`/proc/${apiPid}/task/${apiPid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number)
    return kids.find((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('node'))
  } catch {
    return undefined
  }
}

/** Least-squares slope of y over x (MB per minute when x is in minutes). */
function slope(points: [number, number][]): number {
  const n = points.length
  if (n < 2) return 0
  const mx = points.reduce((s, [x]) => s + x, 0) / n
  const my = points.reduce((s, [, y]) => s + y, 0) / n
  const num = points.reduce((s, [x, y]) => s + (x - mx) * (y - my), 0)
  const den = points.reduce((s, [x]) => s + (x - mx) ** 2, 0)
  return den === 0 ? 0 : num / den
}

async function main(): Promise<void> {
  const databaseUrl = process.env.DATABASE_URL
  const backend = await createBackend(databaseUrl ? 'postgres' : 'pglite', { databaseUrl, redisUrl: process.env.REDIS_URL })
  const destination = await startHelper('destination')
  const tessera = await startTessera(backend)
  try {
    const app = await createPrivateApp(tessera.url, backend.adminKey)
    const token = await createToken(tessera.url, app.key, 'soak token')
    const reactor = await call(tessera.url, backend.adminKey, 'POST', '/reactors', { name: 'echo', code: 'module.exports = async function (req) { return { raw: req.args } }' })
    if (reactor.status !== 201) throw new Error(`creating the Reactor: ${reactor.status}`)
    const created: string[] = [token]
    let i = 0
    const ops = [
      async () => created.push((await call(tessera.url, app.key, 'POST', '/tokens', { type: 'token', data: `soak ${i}-${Math.random()}` })).body?.id ?? token),
      () => call(tessera.url, app.key, 'GET', `/tokens/${created[Math.floor(Math.random() * created.length)]}`),
      () => fetch(`${tessera.url}/proxy/echo`, { method: 'POST', headers: { 'SVC-API-KEY': app.key, 'SVC-PROXY-URL': destination.url, 'content-type': 'application/json' }, body: JSON.stringify({ card: `{{ ${token} }}` }) }).then(async (r) => ({ status: (await r.arrayBuffer(), r.status) })),
      () => call(tessera.url, app.key, 'POST', `/reactors/${reactor.body.id}/react`, { args: { n: i } }),
      () => call(tessera.url, backend.adminKey, 'GET', '/applications?page=1&size=20'),
    ]
    let requests = 0
    let errors = 0
    const startedAt = Date.now()
    const endAt = startedAt + durationS * 1000
    // Open loop: request k is due at k / rate seconds; workers take the next due slot.
    const worker = async () => {
      for (;;) {
        const k = i++
        const due = startedAt + (k * 1000) / rate
        if (due >= endAt) return
        if (due > Date.now()) await new Promise((r) => setTimeout(r, due - Date.now()))
        if (created.length > 5000) created.splice(0, 2500)
        const res = await ops[k % ops.length]!().catch(() => ({ status: 0 }))
        requests++
        if (typeof res === 'object' && res.status >= 400) errors++
        if (typeof res === 'object' && res.status === 0) errors++
      }
    }
    const samples: Sample[] = []
    const sample = () => {
      const runtime = runtimePid(tessera.pid)
      const s: Sample = { t: Math.round((Date.now() - startedAt) / 1000), apiMb: rssMb(tessera.pid) ?? NaN, runtimeMb: runtime === undefined ? null : (rssMb(runtime) ?? null), requests, errors }
      samples.push(s)
      progress(`t=${s.t}s api=${s.apiMb} MB runtime=${s.runtimeMb ?? '-'} MB requests=${requests} errors=${errors}`)
    }
    sample()
    const sampler = setInterval(sample, sampleS * 1000)
    await Promise.all(Array.from({ length: WORKERS }, worker))
    clearInterval(sampler)
    sample()
    await report(samples, backend.name)
  } finally {
    await tessera.stop()
    await destination.stop()
    await backend.drop()
  }
}

async function report(samples: Sample[], backendName: string): Promise<void> {
  const first = samples.find((s) => s.runtimeMb !== null) ?? samples[0]!
  const last = samples[samples.length - 1]!
  const half = samples.filter((s) => s.t >= last.t / 2)
  const apiSlope = slope(half.map((s) => [s.t / 60, s.apiMb]))
  const runtimeSlope = slope(half.filter((s) => s.runtimeMb !== null).map((s) => [s.t / 60, s.runtimeMb!]))
  const rows = [
    { process: 'API', 'RSS start (MB)': first.apiMb, 'RSS end (MB)': last.apiMb, 'RSS max (MB)': Math.max(...samples.map((s) => s.apiMb)), 'slope, 2nd half (MB/min)': round1(apiSlope) },
    { process: 'Reactor runtime', 'RSS start (MB)': first.runtimeMb ?? '-', 'RSS end (MB)': last.runtimeMb ?? '-', 'RSS max (MB)': Math.max(...samples.map((s) => s.runtimeMb ?? 0)), 'slope, 2nd half (MB/min)': round1(runtimeSlope) },
  ]
  const m = machineInfo()
  const date = new Date().toISOString().slice(0, 10)
  const lines = [
    `# Soak: ${Math.round(last.t / 60 * 10) / 10} min of mixed load (${date})`,
    '',
    `${rate} requests/s paced (token create, token read, proxy with a token, Reactor call, Application list, in turn); ${backendName}${process.env.REDIS_URL ? ' + Redis' : ''}. ${last.requests} requests, ${last.errors} errors. Machine: ${m.cpu}, ${m.cores} cores, node ${m.node}.`,
    '',
    markdownTable(Object.keys(rows[0]!), rows.map((r) => Object.values(r))),
    '',
    `Levels off when the second half's slope is near 0 MB/min. Samples every ${sampleS} s:`,
    '',
    markdownTable(['t (s)', 'API (MB)', 'runtime (MB)', 'requests', 'errors'], samples.map((s) => [s.t, s.apiMb, s.runtimeMb ?? '-', s.requests, s.errors])),
    '',
  ]
  const dir = path.join(ROOT, 'bench/results')
  await mkdir(dir, { recursive: true })
  await writeFile(path.join(dir, `${date}-soak.md`), lines.join('\n'))
  await writeFile(path.join(dir, `${date}-soak.json`), JSON.stringify({ date, durationS, rate, backend: backendName, summary: rows, samples }, null, 2) + '\n')
  process.stdout.write(lines.slice(0, 6).join('\n') + '\n')
}

main().catch((err: unknown) => {
  process.stderr.write(`soak failed: ${(err as Error).stack ?? String(err)}\n`)
  process.exit(1)
})
