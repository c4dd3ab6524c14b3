import { randomUUID } from 'node:crypto'
import net from 'node:net'
import { Redis } from 'ioredis'
import type { RateLimitLogger } from '../../src/ratelimit/index.js'

/** Shared test Redis; the suite's Redis run sets REDIS_URL, a local run finds it on 6379. */
export const REDIS_URL = process.env.REDIS_URL || 'redis://127.0.0.1:6379'

/** Why Redis tests are skipped, or false. With REDIS_URL set explicitly they never skip. */
export async function skipWithoutRedis(): Promise<string | false> {
  if (process.env.REDIS_URL) return false
  const { hostname, port } = new URL(REDIS_URL)
  const socket = net.connect(Number(port || 6379), hostname)
  const up = await new Promise<boolean>((resolve) => {
    socket.once('connect', () => resolve(true)).once('error', () => resolve(false))
    socket.setTimeout(500, () => resolve(false))
  })
  socket.destroy()
  return up ? false : `no Redis at ${REDIS_URL}`
}

/** A key prefix no other test (or parallel run) uses; its keys are deleted at teardown. */
export function uniquePrefix(t: { teardown(fn: () => unknown): void }): string {
  const prefix = `tessera:rl:test:${randomUUID()}:`
  t.teardown(() => deleteKeys(prefix))
  return prefix
}

export async function deleteKeys(prefix: string): Promise<void> {
  const redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 })
  try {
    await redis.connect()
    for await (const keys of redis.scanStream({ match: `${prefix}*`, count: 500 }) as AsyncIterable<string[]>) {
      if (keys.length > 0) await redis.del(...keys)
    }
  } finally {
    redis.disconnect()
  }
}

/** Milliseconds of the TTLs of the keys under prefix. */
export async function keyTtls(prefix: string): Promise<number[]> {
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 })
  try {
    const keys = await redis.keys(`${prefix}*`)
    return await Promise.all(keys.map((k) => redis.pttl(k)))
  } finally {
    redis.disconnect()
  }
}

export interface RecordingLogger extends RateLimitLogger {
  warns: string[]
  infos: string[]
}

export function recordingLogger(): RecordingLogger {
  const warns: string[] = []
  const infos: string[] = []
  return { warns, infos, warn: (_obj, msg) => warns.push(msg), info: (_obj, msg) => infos.push(msg) }
}

export function fakeClock(start = 1_700_000_000_000): { now: () => number; advance: (ms: number) => void } {
  let t = start
  return { now: () => t, advance: (ms) => void (t += ms) }
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

export interface FakeRedis {
  url: string
  close(): Promise<void>
}

async function listen(server: net.Server, sockets: Set<net.Socket>): Promise<FakeRedis> {
  server.on('connection', (s) => {
    sockets.add(s)
    s.on('close', () => sockets.delete(s))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as net.AddressInfo
  return {
    url: `redis://127.0.0.1:${port}`,
    close: () => {
      for (const s of sockets) s.destroy()
      return new Promise((resolve) => server.close(() => resolve()))
    },
  }
}

/** Accepts TCP and never answers: a Redis frozen before the handshake. */
export function startSilentRedis(): Promise<FakeRedis> {
  const sockets = new Set<net.Socket>()
  const server = net.createServer((s) => s.on('data', () => undefined))
  return listen(server, sockets)
}

/** A port nothing listens on. */
export async function closedPortUrl(): Promise<string> {
  const server = net.createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as net.AddressInfo
  await new Promise((resolve) => server.close(resolve))
  return `redis://127.0.0.1:${port}`
}

export interface RedisProxy extends FakeRedis {
  /** Like SIGSTOP: requests are held (the kernel would buffer them), nothing is answered. */
  freeze(): void
  /** Like SIGCONT: held requests are delivered, answers flow again. */
  thaw(): void
  /** Like a killed Redis: connections are cut and new ones refused until thaw(). */
  kill(): void
}

/** A TCP proxy in front of the real Redis, to freeze or kill "Redis" without touching the shared one. */
export async function startRedisProxy(): Promise<RedisProxy> {
  const target = new URL(REDIS_URL)
  const sockets = new Set<net.Socket>()
  const held: { upstream: net.Socket; data: Buffer }[] = []
  let mode: 'pass' | 'frozen' | 'killed' = 'pass'
  const server = net.createServer((client) => {
    if (mode === 'killed') return void client.destroy()
    const upstream = net.connect(Number(target.port || 6379), target.hostname)
    sockets.add(upstream)
    upstream.on('close', () => sockets.delete(upstream))
    client.on('data', (data) => (mode === 'pass' ? upstream.write(data) : held.push({ upstream, data })))
    upstream.on('data', (data) => client.write(data))
    client.on('close', () => upstream.destroy()).on('error', () => upstream.destroy())
    upstream.on('close', () => client.destroy()).on('error', () => client.destroy())
  })
  const base = await listen(server, sockets)
  return {
    ...base,
    freeze: () => void (mode = 'frozen'),
    thaw: () => {
      mode = 'pass'
      for (const { upstream, data } of held.splice(0)) upstream.write(data)
    },
    kill: () => {
      mode = 'killed'
      held.length = 0
      for (const s of sockets) s.destroy()
    },
  }
}
