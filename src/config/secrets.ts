import { randomBytes } from 'node:crypto'
import { closeSync, existsSync, fsyncSync, linkSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs'
import path from 'node:path'
import type { Config } from './load-config.js'

export interface Secrets {
  /** `SVC_MASTER_KEY` format: `id:base64,...` (first encrypts). */
  masterKey: string
  keyHashSecret: string
  /** Names of secrets that were generated into the data dir because the environment lacked them. */
  generated: string[]
}

interface SecretsFile {
  master_key?: string
  key_hash_secret?: string
}

export type SecretName = keyof SecretsFile

const VARIABLES: Record<SecretName, string> = { master_key: 'SVC_MASTER_KEY', key_hash_secret: 'SVC_KEY_HASH_SECRET' }

/** A secret an operator command needs is neither in the environment nor in the data dir, or the file cannot be read. */
export class SecretsError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'SecretsError'
  }
}

/**
 * Secrets come from the environment; what is missing is generated once into
 * `<dataDir>/secrets.json` (mode 0600) so a zero-setup start keeps working across restarts.
 * Only the server calls this: see `requireSecret` for everything else.
 */
export function resolveSecrets(config: Config): Secrets {
  const file = secretsFile(config)
  // Two servers starting at once on a new data dir each generate secrets; the first to publish
  // its file wins and the other takes that file's (otherwise one would run under a master key no
  // disk holds). A second round finds the file and generates nothing it holds.
  for (let round = 0; ; round++) {
    const existed = existsSync(file)
    const stored = readSecretsFile(file)
    const generated: string[] = []
    let masterKey = config.masterKey
    if (!masterKey) {
      masterKey = stored.master_key ?? `k1:${randomBytes(32).toString('base64')}`
      if (!stored.master_key) generated.push('master_key')
      stored.master_key = masterKey
    }
    let keyHashSecret = config.keyHashSecret
    if (!keyHashSecret) {
      keyHashSecret = stored.key_hash_secret ?? randomBytes(32).toString('base64')
      if (!stored.key_hash_secret) generated.push('key_hash_secret')
      stored.key_hash_secret = keyHashSecret
    }
    if (generated.length === 0 || writePrivately(file, JSON.stringify(stored, null, 2), existed || round > 0)) return { masterKey, keyHashSecret, generated }
  }
}

/**
 * A new file of mode 0600 put in place of `file`: never a half-written file, and never the mode
 * of a file that was there before (one restored from a backup as 0644 would otherwise get the
 * master key). Without `replace` it is only linked in where no file is, and false says another
 * process put one there first.
 */
function writePrivately(file: string, text: string, replace: boolean): boolean {
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 })
  const temporary = `${file}.${process.pid}.tmp`
  rmSync(temporary, { force: true })
  try {
    const fd = openSync(temporary, 'wx', 0o600)
    try {
      writeSync(fd, text)
      fsyncSync(fd)
    } finally {
      closeSync(fd)
    }
    if (replace) renameSync(temporary, file)
    else linkSync(temporary, file)
    return true
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST' && !replace) return false
    throw err
  } finally {
    rmSync(temporary, { force: true })
  }
}

/**
 * A secret the servers use, for operator commands: from the environment, else from
 * `<dataDir>/secrets.json`; never generated, because a fresh secret opens nothing the servers
 * wrote (a key that never authenticates, an audit log that looks tampered with).
 */
export function requireSecret(config: Config, name: SecretName): string {
  const fromEnv = name === 'master_key' ? config.masterKey : config.keyHashSecret
  if (fromEnv) return fromEnv
  const file = secretsFile(config)
  const stored = readSecretsFile(file)[name]
  if (stored) return stored
  const where = existsSync(file) ? `${file} holds no ${name}` : `${file} does not exist`
  throw new SecretsError(`${VARIABLES[name]} is not set and ${where}: set it to the servers' value (operator commands never generate secrets)`)
}

/** The secret the data dir holds, if it can be read, whatever the environment says (to tell a wrong variable from a tampered database). */
export function storedSecret(config: Config, name: SecretName): string | undefined {
  try {
    return readSecretsFile(secretsFile(config))[name]
  } catch {
    return undefined
  }
}

export function secretsFile(config: Config): string {
  return path.resolve(config.dataDir, 'secrets.json')
}

function readSecretsFile(file: string): SecretsFile {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as SecretsFile
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {}
    // Not JSON.parse's message: it quotes the text around the fault, which may be a key.
    if (err instanceof SyntaxError) throw new SecretsError(`cannot read ${file}: it is not valid JSON`)
    throw new SecretsError(`cannot read ${file}: ${(err as Error).message}`)
  }
}
