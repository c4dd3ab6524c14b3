import { randomBytes } from 'node:crypto'
import { closeSync, existsSync, fsyncSync, linkSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs'
import path from 'node:path'
import { KeyringError, parseKeyring } from '../vault/crypto/parse-keyring.js'
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
    validateStored(file, stored)
    refuseLostHashSecret(config, file, stored)
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
 * A secrets.json a server wrote holds every secret the environment did not set then. One that
 * holds the generated master key but no key-hash secret was restored in part (or the variable
 * that was set then is not now): the database's API keys are hashed under a secret kept
 * elsewhere, and a new one would make every one of them invalid.
 */
function refuseLostHashSecret(config: Config, file: string, stored: SecretsFile): void {
  if (config.keyHashSecret || stored.key_hash_secret !== undefined || stored.master_key === undefined) return
  throw new SecretsError(
    `SVC_KEY_HASH_SECRET is not set and ${file} holds a master_key but no key_hash_secret: the API keys of this installation were hashed under a secret kept elsewhere, so none is generated; set SVC_KEY_HASH_SECRET to the servers' value or restore key_hash_secret in the file`,
  )
}

/**
 * Takes back what this start generated into the data dir, for a start that was refused because
 * of it (a fresh key-hash secret for a database that holds keys): left there, the next start
 * would find it and take it for the servers' secret. Values changed by someone since stay.
 */
export function forgetGeneratedSecrets(config: Config, secrets: Secrets): void {
  const file = secretsFile(config)
  const stored = readSecretsFile(file)
  const mine: SecretsFile = { master_key: secrets.masterKey, key_hash_secret: secrets.keyHashSecret }
  let changed = false
  for (const name of secrets.generated as SecretName[]) {
    if (stored[name] === mine[name]) {
      delete stored[name]
      changed = true
    }
  }
  if (!changed) return
  if (Object.keys(stored).length === 0) rmSync(file, { force: true })
  else writePrivately(file, JSON.stringify(stored, null, 2), true)
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
  const stored = readSecretsFile(file)
  validateStored(file, stored, name)
  if (stored[name]) return stored[name]
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

/** Where the key-hash secret in use came from, for messages (never the secret). */
export function keyHashSecretSource(config: Config): string {
  return config.keyHashSecret ? 'SVC_KEY_HASH_SECRET' : `the key_hash_secret in ${secretsFile(config)}`
}

/** The file's entries, each a string if present; never quotes the file's text. */
function readSecretsFile(file: string): SecretsFile {
  let parsed: unknown
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'))
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {}
    // Not JSON.parse's message: it quotes the text around the fault, which may be a key.
    if (err instanceof SyntaxError) throw new SecretsError(`cannot read ${file}: it is not valid JSON`)
    throw new SecretsError(`cannot read ${file}: ${(err as Error).message}`)
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new SecretsError(`cannot read ${file}: it must hold a JSON object ({"master_key": ..., "key_hash_secret": ...})`)
  const entries = parsed as Record<string, unknown>
  for (const name of Object.keys(VARIABLES) as SecretName[]) {
    if (entries[name] !== undefined && typeof entries[name] !== 'string') throw new SecretsError(`cannot read ${file}: its ${name} must be a string`)
  }
  return entries as SecretsFile
}

/**
 * The secrets a file holds must pass the checks their variables pass (loadConfig), before any
 * database is opened with them. Messages name the file and the entry, never quote a value.
 */
function validateStored(file: string, stored: SecretsFile, only?: SecretName): void {
  if (stored.master_key !== undefined && (only ?? 'master_key') === 'master_key') {
    try {
      parseKeyring(stored.master_key)
    } catch (err) {
      if (!(err instanceof KeyringError)) throw err
      throw new SecretsError(`${file}: its master_key is not a valid master key (${err.problems.join('; ')})`)
    }
  }
  if (stored.key_hash_secret !== undefined && (only ?? 'key_hash_secret') === 'key_hash_secret' && stored.key_hash_secret.length < 32) {
    throw new SecretsError(`${file}: its key_hash_secret must be at least 32 characters, as SVC_KEY_HASH_SECRET must`)
  }
}
