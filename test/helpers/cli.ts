import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import pg from 'pg'
import { runCli } from '../../src/cli/program.js'

/** `tessera <argv>` in process, with `env` as its whole environment: exit code, stdout and stderr lines joined. */
export async function cli(env: Record<string, string>, ...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = []
  const err: string[] = []
  const code = await runCli(argv, { env, out: (l) => void out.push(l), note: (l) => void err.push(l) })
  return { code, out: out.join('\n'), err: err.join('\n') }
}

/** One master key of a keyring (`SVC_MASTER_KEY`): `<id>:<32 random bytes, base64>`. */
export const masterKey = (id: string) => `${id}:${randomBytes(32).toString('base64')}`

/**
 * A database of its own for servers and CLI commands run as separate processes: a data dir (PGlite's
 * files, and secrets.json with either database), and with DATABASE_URL a fresh Postgres schema chosen
 * through the connection string (as an operator could). Both go with the test. `defaults` come
 * first: a key-hash secret and silent logs unless the caller gives its own.
 */
export async function processStorage(
  t: { teardown(fn: () => unknown): void },
  prefix: string,
  defaults: Record<string, string> = { SVC_KEY_HASH_SECRET: randomBytes(32).toString('hex'), SVC_LOG_LEVEL: 'silent' },
): Promise<Record<string, string>> {
  const dir = mkdtempSync(path.join(os.tmpdir(), `tessera-${prefix}-`))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const base = { ...defaults, SVC_DATA_DIR: dir }
  if (!process.env.DATABASE_URL) return base
  const schema = `${prefix}_${randomBytes(6).toString('hex')}`
  const admin = new pg.Client({ connectionString: process.env.DATABASE_URL })
  await admin.connect()
  await admin.query(`create schema "${schema}"`)
  t.teardown(async () => {
    await admin.query(`drop schema "${schema}" cascade`)
    await admin.end()
  })
  const url = new URL(process.env.DATABASE_URL)
  url.searchParams.set('options', `-c search_path=${schema}`)
  return { ...base, DATABASE_URL: url.toString() }
}

/** `processStorage` with the schema in place, as a server's first start or `tessera migrate` leaves it: the other commands refuse a database that is not there. */
export async function migratedStorage(t: { teardown(fn: () => unknown): void }, prefix: string): Promise<Record<string, string>> {
  const env = await processStorage(t, prefix)
  const migrated = await cli(env, 'migrate')
  if (migrated.code !== 0) throw new Error(`tessera migrate failed: ${migrated.err}`)
  return env
}
