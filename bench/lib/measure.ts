/**
 * Timing primitives. Latency is timed by the bench itself with `process.hrtime.bigint()` around
 * each request on a keep-alive undici connection (autocannon's histogram has 1 ms resolution);
 * saturation throughput comes from autocannon. Repetitions are interleaved and summarized by
 * their median, because these machines are noisy.
 */
import autocannon from 'autocannon'
import { Pool } from 'undici'

export interface BenchRequest {
  method: 'GET' | 'POST'
  path: string
  headers: Record<string, string>
  body?: string
}

export interface LatencyRun {
  requests: number
  durationS: number
  /** Per request, nanoseconds, unsorted. */
  samplesNs: number[]
}

/**
 * `concurrency` closed loops over one keep-alive pool of as many connections: each sends its
 * next request when the previous answer is fully read. Stops after `requests` in all or after
 * `durationMs`, whichever comes first; every non-2xx answer is an error.
 */
export async function closedLoop(origin: string, req: BenchRequest | (() => BenchRequest), opts: { concurrency: number; requests?: number; durationMs?: number }): Promise<LatencyRun> {
  const pool = new Pool(origin, { connections: opts.concurrency, pipelining: 1, keepAliveTimeout: 30_000 })
  const samplesNs: number[] = []
  const limit = opts.requests ?? Infinity
  const deadline = opts.durationMs === undefined ? Infinity : Date.now() + opts.durationMs
  let started = 0
  const t0 = process.hrtime.bigint()
  const worker = async () => {
    while (started < limit && Date.now() < deadline) {
      started++
      const r = typeof req === 'function' ? req() : req
      const t = process.hrtime.bigint()
      const res = await pool.request({ method: r.method, path: r.path, headers: r.headers, body: r.body })
      const text = res.statusCode < 300 ? (await res.body.dump(), '') : await res.body.text()
      samplesNs.push(Number(process.hrtime.bigint() - t))
      if (res.statusCode >= 300) throw new Error(`${r.method} ${r.path}: status ${res.statusCode} ${text.slice(0, 300)}`)
    }
  }
  try {
    await Promise.all(Array.from({ length: opts.concurrency }, worker))
  } finally {
    await pool.close()
  }
  return { requests: samplesNs.length, durationS: Number(process.hrtime.bigint() - t0) / 1e9, samplesNs }
}

export interface Saturation {
  rps: number
  requests: number
  errors: number
}

/** autocannon at `connections` for `durationS` seconds; several URLs are served round-robin by connection. */
export async function saturate(urls: string[], req: BenchRequest, opts: { connections: number; durationS: number }): Promise<Saturation> {
  const result = await autocannon({
    url: (urls.length === 1 ? urls[0]! : urls) as string,
    connections: opts.connections,
    duration: opts.durationS,
    pipelining: 1,
    method: req.method,
    headers: req.headers,
    body: req.body,
    timeout: 30,
  })
  const requests = result['2xx']
  return { rps: requests / (result.duration || opts.durationS), requests, errors: result.errors + result.non2xx }
}

/** Nearest-rank percentile of unsorted nanosecond samples, in microseconds. */
export function percentileUs(samplesNs: number[], p: number): number {
  const sorted = [...samplesNs].sort((a, b) => a - b)
  if (sorted.length === 0) return NaN
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]! / 1000
}

export function median(values: number[]): number {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b)
  if (v.length === 0) return NaN
  const mid = Math.floor(v.length / 2)
  return v.length % 2 ? v[mid]! : (v[mid - 1]! + v[mid]!) / 2
}

export const round1 = (n: number) => Math.round(n * 10) / 10
export const round0 = (n: number) => Math.round(n)

/**
 * Runs every variant once per round, rotating the order each round so that no variant always
 * follows the same one; drift (thermal, GC, background load) then hits all of them alike.
 */
export async function interleave<V>(rounds: number, variants: V[], fn: (variant: V, round: number) => Promise<void>): Promise<void> {
  for (let r = 0; r < rounds; r++) {
    for (let i = 0; i < variants.length; i++) await fn(variants[(i + r) % variants.length]!, r)
  }
}

export function progress(message: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`)
}
