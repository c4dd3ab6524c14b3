/**
 * Tessera as a separate process under test: compiled once with `tsc -p tsconfig.build.json`,
 * started as `npm run serve` starts it (`node <its flags> dist/src/main.js`) pinned to the SUT core, on a fresh Postgres database
 * (created and dropped by the bench) or a temporary PGlite directory.
 */
import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import pg from 'pg'
import { captureOutput, spawnNode, stopChild, SUT_CORE } from './proc.js'

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
const MAIN = path.join(ROOT, 'dist/src/main.js')
/** Node's flags from `npm run serve` (`node <flags> dist/src/main.js`): Tessera runs here as it runs in production. */
const SERVE_FLAGS = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: { serve: string } }).scripts.serve
  .split(' ')
  .filter((arg) => arg.startsWith('--'))
// High enough that nothing is ever limited: the limiter still counts every request.
const UNLIMITED = '1000000000/10'
const BASE62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'

let built: Promise<void> | undefined
/** Compiles src/ into dist/ once per bench run. */
export function buildTessera(): Promise<void> {
  built ??= promisify(execFile)('npx', ['tsc', '-p', 'tsconfig.build.json'], { cwd: ROOT }).then(
    () => undefined,
    (err: { stdout?: string; message: string }) => {
      throw new Error(`tsc -p tsconfig.build.json failed:\n${err.stdout ?? err.message}`)
    },
  )
  return built
}

export function generateKey(): string {
  const bytes = randomBytes(43)
  return 'key_' + Array.from(bytes, (b) => BASE62[b % 62]).join('')
}

/** Secrets and storage shared by every Tessera process of one backend (the scaling figure runs two). */
export interface Backend {
  name: 'postgres' | 'pglite'
  env: Record<string, string>
  adminKey: string
  drop(): Promise<void>
}

export async function createBackend(kind: 'postgres' | 'pglite', urls: { databaseUrl?: string; redisUrl?: string }): Promise<Backend> {
  const adminKey = generateKey()
  const env: Record<string, string> = {
    SVC_LOG_LEVEL: 'warn',
    SVC_BOOTSTRAP_API_KEY: adminKey,
    SVC_MASTER_KEY: `k1:${randomBytes(32).toString('base64')}`,
    SVC_KEY_HASH_SECRET: randomBytes(32).toString('hex'),
    SVC_PROXY_ALLOW_HTTP: 'true',
    SVC_PROXY_ALLOW_PRIVATE: 'true',
    SVC_RATE_LIMIT_KEY_PREFIX: `bench:${randomBytes(6).toString('hex')}:`,
  }
  for (const scope of ['GLOBAL', 'PORTAL', 'TOKENS_SEARCH', 'TOKENS_LIST', 'TOKENS_CREATE']) env[`SVC_RATE_LIMIT_${scope}`] = UNLIMITED
  if (urls.redisUrl) env.REDIS_URL = urls.redisUrl
  if (kind === 'pglite') {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'tessera-bench-'))
    env.SVC_DATA_DIR = dir
    return { name: kind, env, adminKey, drop: async () => rmSync(dir, { recursive: true, force: true }) }
  }
  if (!urls.databaseUrl) throw new Error('the postgres backend needs a DATABASE_URL')
  const name = `bench_${randomBytes(6).toString('hex')}`
  await adminQuery(urls.databaseUrl, `create database "${name}"`)
  const url = new URL(urls.databaseUrl)
  url.pathname = `/${name}`
  env.DATABASE_URL = url.toString()
  env.SVC_DATA_DIR = mkdtempSync(path.join(os.tmpdir(), 'tessera-bench-'))
  return {
    name: kind,
    env,
    adminKey,
    drop: async () => {
      rmSync(env.SVC_DATA_DIR!, { recursive: true, force: true })
      await adminQuery(urls.databaseUrl!, `drop database if exists "${name}" with (force)`)
    },
  }
}

async function adminQuery(databaseUrl: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  try {
    await client.query(sql)
  } finally {
    await client.end()
  }
}

export async function serverVersion(databaseUrl: string): Promise<string> {
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  try {
    return (await client.query<{ server_version: string }>('show server_version')).rows[0]?.server_version ?? 'unknown'
  } finally {
    await client.end()
  }
}

export interface TesseraProcess {
  url: string
  pid: number
  stop(): Promise<void>
}

/**
 * `BENCH_TESSERA_ENV` (a JSON object of strings): settings for every Tessera a bench starts, for
 * a diagnosis only, e.g. `{"SVC_AUDIT_ENABLED":"false"}` shows the whole table without the audit
 * log. A variant's own settings still win ((g) keeps the log off). Such a run is not a result.
 */
export const benchTesseraEnv: Record<string, string> = parseBenchEnv(process.env.BENCH_TESSERA_ENV)

function parseBenchEnv(text: string | undefined): Record<string, string> {
  if (!text) return {}
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    value = undefined
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value) || !Object.values(value).every((v) => typeof v === 'string')) {
    throw new Error(`BENCH_TESSERA_ENV must be a JSON object of strings, e.g. '{"SVC_AUDIT_ENABLED":"false"}'`)
  }
  return value as Record<string, string>
}

/** Starts one Tessera on a free port and waits for `/readyz`. */
export async function startTessera(backend: Backend, options: { core?: number; env?: Record<string, string>; nodeArgs?: string[] } = {}): Promise<TesseraProcess> {
  await buildTessera()
  const port = await freePort()
  const child = spawnNode([...SERVE_FLAGS, ...(options.nodeArgs ?? []), MAIN], { core: options.core ?? SUT_CORE, cwd: ROOT, env: { PATH: process.env.PATH, ...backend.env, ...benchTesseraEnv, ...options.env, PORT: String(port), HOST: '127.0.0.1' } })
  const output = captureOutput(child)
  const url = `http://127.0.0.1:${port}`
  const deadline = Date.now() + 60_000
  for (;;) {
    if (child.exitCode !== null) throw new Error(`tessera exited with ${child.exitCode}:\n${output()}`)
    if (Date.now() > deadline) {
      await stopChild(child)
      throw new Error(`tessera not ready after 60 s:\n${output()}`)
    }
    const ok = await fetch(`${url}/readyz`).then((r) => r.ok, () => false)
    if (ok) break
    await new Promise((r) => setTimeout(r, 100))
  }
  return { url, pid: child.pid!, stop: () => stopChild(child, 10_000) }
}

async function freePort(): Promise<number> {
  const { createServer } = await import('node:net')
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as { port: number }).port
  await new Promise((r) => server.close(r))
  return port
}
