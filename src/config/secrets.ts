import { randomBytes } from 'node:crypto'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
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

/**
 * Secrets come from the environment; what is missing is generated once into
 * `<dataDir>/secrets.json` (mode 0600) so a zero-setup start keeps working across restarts.
 */
export function resolveSecrets(config: Config): Secrets {
  const file = path.resolve(config.dataDir, 'secrets.json')
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
  if (generated.length) {
    mkdirSync(path.dirname(file), { recursive: true })
    writeFileSync(file, JSON.stringify(stored, null, 2), { mode: 0o600 })
  }
  return { masterKey, keyHashSecret, generated }
}

function readSecretsFile(file: string): SecretsFile {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as SecretsFile
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {}
    throw new Error(`cannot read ${file}: ${(err as Error).message}`)
  }
}
