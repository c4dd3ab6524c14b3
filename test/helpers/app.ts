import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { buildApp } from '../../src/app.js'
import type { BodyBudget } from '../../src/http/body-budget.js'
import type { Clock } from '../../src/clock.js'
import { testConfig, type Config } from '../../src/config/index.js'
import { generateApiKey } from '../../src/auth/api-keys.js'
import { createLogger } from '../../src/logger.js'
import { presentToken } from '../../src/http/presenters/tokens.js'
import { openServices, type Services } from '../../src/services.js'

export interface TestApp {
  url: string
  services: Services
  config: Config
  /** The bootstrap management key of tenant `default`. */
  adminKey: string
  schema: string | undefined
  dataDir: string | undefined
  request(method: string, path: string, options?: RequestOptions): Promise<TestResponse>
  close(): Promise<void>
}

export interface RequestOptions {
  key?: string | null
  body?: unknown
  rawBody?: string | Buffer
  headers?: Record<string, string>
}

export interface TestResponse {
  status: number
  headers: Headers
  body: any // eslint-disable-line @typescript-eslint/no-explicit-any -- tests inspect arbitrary JSON
  text: string
}

interface TapLike {
  teardown(fn: () => unknown): void
}

export interface StartOptions {
  /** Open the storage of an earlier (closed) app instead of a fresh one: a restart. */
  reuse?: TestApp
  /** Keep PGlite on disk (in a temporary directory) so a later app can reuse it. */
  persistent?: boolean
  /** Receives every log line the app writes. */
  logLines?: string[]
  /** The time every expiry decision reads (see helpers/clock.ts); the system clock by default. */
  clock?: Clock
  /** The app's budget of body bytes in flight, to watch it (one of SVC_BODY_BYTES_IN_FLIGHT otherwise). */
  bodyBudget?: BodyBudget
}

/**
 * A real Tessera on port 0: PGlite in memory by default, or a fresh Postgres schema when
 * DATABASE_URL is set (and Redis when REDIS_URL is set), torn down with the test.
 */
export async function startTestApp(t: TapLike, env: Record<string, string> = {}, options: StartOptions = {}): Promise<TestApp> {
  const adminKey = options.reuse?.adminKey ?? generateApiKey()
  const base: Record<string, string> = {
    SVC_BOOTSTRAP_API_KEY: adminKey,
    SVC_MASTER_KEY: `k1:${randomBytes(32).toString('base64')}`,
    SVC_KEY_HASH_SECRET: randomBytes(32).toString('hex'),
    SVC_PROXY_ALLOW_HTTP: 'true',
    SVC_PROXY_ALLOW_PRIVATE: 'true',
    // Each app counts on its own in a shared Redis, so parallel test files never limit each other.
    SVC_RATE_LIMIT_KEY_PREFIX: `test:${randomBytes(6).toString('hex')}:`,
  }
  if (process.env.DATABASE_URL) base.DATABASE_URL = process.env.DATABASE_URL
  if (process.env.REDIS_URL) base.REDIS_URL = process.env.REDIS_URL
  if (options.reuse) {
    base.SVC_KEY_HASH_SECRET = options.reuse.config.keyHashSecret!
    base.SVC_MASTER_KEY = options.reuse.config.masterKey!
  }
  const ownDir = !options.reuse && options.persistent && !base.DATABASE_URL ? mkdtempSync(path.join(os.tmpdir(), 'tessera-test-')) : undefined
  const dataDir = options.reuse?.dataDir ?? ownDir
  if (dataDir) base.SVC_DATA_DIR = dataDir
  const config = testConfig({ ...base, ...env })
  const ownSchema = config.databaseUrl && !options.reuse ? `t_${randomBytes(6).toString('hex')}` : undefined
  const schema = options.reuse?.schema ?? ownSchema
  const logger = options.logLines ? createLogger(config, { write: (line: string) => void options.logLines!.push(line) }) : createLogger(config)
  const services = await openServices(config, logger, { masterKey: config.masterKey!, keyHashSecret: config.keyHashSecret! }, { presentToken }, { schema, inMemory: !dataDir, clock: options.clock })
  const server = http.createServer(buildApp(services, undefined, options.bodyBudget).callback())
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`

  let closed = false
  const close = async () => {
    if (closed) return
    closed = true
    server.closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
    await services.close()
  }
  t.teardown(async () => {
    await close()
    // Storage outlives close() so a restarted app can reuse it; it goes with the test.
    if (ownSchema) await dropSchema(config.databaseUrl!, ownSchema)
    if (ownDir) rmSync(ownDir, { recursive: true, force: true })
  })

  return {
    url,
    services,
    config,
    adminKey,
    schema,
    dataDir,
    close,
    request: (method, path, options = {}) => send(url, method, path, options.key === undefined ? adminKey : options.key, options),
  }
}

async function send(url: string, method: string, path: string, key: string | null, options: RequestOptions): Promise<TestResponse> {
  const headers: Record<string, string> = { ...options.headers }
  if (key !== null) headers['SVC-API-KEY'] = key
  let body: string | Buffer | undefined = options.rawBody
  if (options.body !== undefined) {
    body = JSON.stringify(options.body)
    headers['content-type'] ??= 'application/json'
  }
  const res = await fetch(url + path, { method, headers, body })
  const text = await res.text()
  let parsed: unknown = undefined
  try {
    parsed = text ? JSON.parse(text) : undefined
  } catch {
    parsed = undefined
  }
  return { status: res.status, headers: res.headers, body: parsed, text }
}

async function dropSchema(databaseUrl: string, schema: string): Promise<void> {
  const { default: pg } = await import('pg')
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  try {
    await client.query(`drop schema if exists "${schema}" cascade`)
  } finally {
    await client.end()
  }
}
