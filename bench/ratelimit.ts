/**
 * Added latency and CPU of the rate-limit middleware: the same no-op Koa route without the
 * limiter, with the in-process store, with the Redis store (leases of the default 1%, here
 * 100 requests, since the limit is set too high to ever block) and with Redis without leases
 * (a round trip per request), in one process and one run.
 * Variants are interleaved round by round so drift (thermal, GC, other load) hits all of them.
 * Latency is timed per request around a keep-alive request at concurrency 1 (hrtime, ns).
 *
 *   npx tsx bench/ratelimit.ts        (REDIS_URL, default redis://127.0.0.1:6379)
 */
import { randomUUID } from 'node:crypto'
import { once } from 'node:events'
import type { AddressInfo } from 'node:net'
import { dirname, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import Koa from 'koa'
import { Client } from 'undici'
import { testConfig } from '../src/config/index.js'
import { rateLimitMiddleware } from '../src/http/middleware/rate-limit.js'
import { createRateLimiter, type RateLimiter } from '../src/ratelimit/index.js'
import { writeResult } from './lib/write-result.js'

export interface RateLimitBenchOptions {
  /** Timed requests per variant per round. */
  requests?: number
  rounds?: number
  /** Untimed requests per variant before the first round (JIT, connection, script load). */
  warmup?: number
  /** Unset: Redis variant skipped. */
  redisUrl?: string
  /** Where the JSON result goes; null: not written. */
  outFile?: string | null
}

export interface VariantResult {
  variant: string
  requests: number
  p50Us: number
  p99Us: number
  addedP50Us: number
  addedP99Us: number
  cpuUsPerRequest: number
  addedCpuUsPerRequest: number
}

export interface RateLimitBenchResult {
  date: string
  node: string
  options: Required<Omit<RateLimitBenchOptions, 'redisUrl' | 'outFile'>> & { redis: boolean }
  variants: VariantResult[]
  notes: string[]
}

interface Variant {
  name: string
  client: Client
  samplesNs: number[]
  cpuUs: number
  close(): Promise<void>
}

const DEFAULT_OUT = resolve(dirname(fileURLToPath(import.meta.url)), 'results/ratelimit-latest.json')
// High enough that no request is ever limited: the bench measures the cost of counting.
const UNLIMITED = '1000000000/10'

async function startVariant(name: string, limiter: RateLimiter | undefined): Promise<Variant> {
  const app = new Koa()
  if (limiter) app.use(rateLimitMiddleware(limiter, testConfig({ SVC_RATE_LIMIT_GLOBAL: UNLIMITED })))
  app.use((ctx) => {
    ctx.body = 'ok'
  })
  const server = app.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const client = new Client(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, { pipelining: 1 })
  return {
    name,
    client,
    samplesNs: [],
    cpuUs: 0,
    async close() {
      await client.close()
      server.closeAllConnections()
      await new Promise((r) => server.close(r))
      await limiter?.close()
    },
  }
}

async function runBatch(v: Variant, n: number, record: boolean): Promise<void> {
  const cpuStart = process.cpuUsage()
  for (let i = 0; i < n; i++) {
    const started = process.hrtime.bigint()
    const res = await v.client.request({ method: 'GET', path: '/bench' })
    await res.body.dump()
    const ns = Number(process.hrtime.bigint() - started)
    if (res.statusCode !== 200) throw new Error(`${v.name}: status ${res.statusCode}`)
    if (record) v.samplesNs.push(ns)
  }
  const cpu = process.cpuUsage(cpuStart)
  if (record) v.cpuUs += cpu.user + cpu.system
}

function percentileUs(sortedNs: number[], p: number): number {
  const i = Math.min(sortedNs.length - 1, Math.floor((p / 100) * sortedNs.length))
  return (sortedNs[i] ?? 0) / 1000
}

function summarize(variants: Variant[]): VariantResult[] {
  const stats = variants.map((v) => {
    const sorted = [...v.samplesNs].sort((a, b) => a - b)
    return { v, p50: percentileUs(sorted, 50), p99: percentileUs(sorted, 99), cpu: v.cpuUs / v.samplesNs.length }
  })
  const base = stats[0]
  const round = (n: number) => Math.round(n * 10) / 10
  return stats.map((s) => ({
    variant: s.v.name,
    requests: s.v.samplesNs.length,
    p50Us: round(s.p50),
    p99Us: round(s.p99),
    addedP50Us: round(s.p50 - (base?.p50 ?? 0)),
    addedP99Us: round(s.p99 - (base?.p99 ?? 0)),
    cpuUsPerRequest: round(s.cpu),
    addedCpuUsPerRequest: round(s.cpu - (base?.cpu ?? 0)),
  }))
}

async function startVariants(redisUrl: string | undefined, notes: string[]): Promise<Variant[]> {
  const logger = { warn: (o: object, m: string) => notes.push(`warn: ${m} ${JSON.stringify(o)}`), info: () => undefined }
  const env = { SVC_RATE_LIMIT_GLOBAL: UNLIMITED }
  const variants = [
    await startVariant('baseline', undefined),
    await startVariant('memory', createRateLimiter({ config: testConfig(env), logger })),
  ]
  if (redisUrl) {
    // A fresh prefix keeps the run apart from any live data; its one key expires with the window.
    const keyPrefix = `tessera:rl:bench:${randomUUID()}:`
    const limiter = createRateLimiter({ config: testConfig({ ...env, REDIS_URL: redisUrl }), logger, keyPrefix })
    variants.push(await startVariant('redis', limiter))
    // Leases off (SVC_RATE_LIMIT_LEASE_PERCENT=0): a round trip per request, as every request
    // of a small route limit (< 200) costs; reported beside the default.
    const exact = createRateLimiter({ config: testConfig({ ...env, REDIS_URL: redisUrl, SVC_RATE_LIMIT_LEASE_PERCENT: '0' }), logger, keyPrefix: `${keyPrefix}exact:` })
    variants.push(await startVariant('redis, no leases', exact))
  }
  return variants
}

export async function runRateLimitBench(options: RateLimitBenchOptions = {}): Promise<RateLimitBenchResult> {
  const opts = { requests: options.requests ?? 3000, rounds: options.rounds ?? 10, warmup: options.warmup ?? 1000 }
  const notes: string[] = []
  const variants = await startVariants(options.redisUrl, notes)
  try {
    for (const v of variants) await runBatch(v, opts.warmup, false)
    for (let r = 0; r < opts.rounds; r++) {
      // Rotate the order each round so no variant always runs right after another.
      for (let i = 0; i < variants.length; i++) await runBatch(variants[(i + r) % variants.length]!, opts.requests, true)
    }
  } finally {
    await Promise.all(variants.map((v) => v.close()))
  }
  if (!options.redisUrl) notes.push('redis variant skipped: no Redis URL')
  const result: RateLimitBenchResult = {
    date: new Date().toISOString(),
    node: process.version,
    options: { ...opts, redis: Boolean(options.redisUrl) },
    variants: summarize(variants),
    notes,
  }
  await writeResult(options.outFile, DEFAULT_OUT, result)
  return result
}

export function printRateLimitBench(result: RateLimitBenchResult): void {
  console.log(`rate limiter, ${result.options.rounds} rounds x ${result.options.requests} requests per variant, concurrency 1, ${result.node}`)
  console.table(result.variants.map((v) => ({
    variant: v.variant,
    'p50 µs': v.p50Us,
    'p99 µs': v.p99Us,
    'added p50 µs': v.addedP50Us,
    'added p99 µs': v.addedP99Us,
    'CPU µs/req': v.cpuUsPerRequest,
    'added CPU µs/req': v.addedCpuUsPerRequest,
  })))
  for (const note of result.notes) console.log(note)
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
  const result = await runRateLimitBench({ redisUrl })
  printRateLimitBench(result)
}
