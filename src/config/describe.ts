import { parseKeyring } from '../vault/crypto/parse-keyring.js'
import type { Config } from './load-config.js'

const SECRET_KEYS = new Set<keyof Config>(['masterKey', 'bootstrapApiKey', 'operatorKey', 'keyHashSecret'])

/**
 * The effective configuration as an operator may see it: secrets replaced by whether they are set
 * (the master key by its key ids only), passwords hidden in URLs (userinfo and query).
 */
export function describeConfig(config: Config): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [name, value] of Object.entries(config) as [keyof Config, unknown][]) {
    if (SECRET_KEYS.has(name)) out[name] = describeSecret(name, value as string | undefined, config.dataDir)
    else if (name === 'audit') out[name] = { ...config.audit, secret: config.audit.secret ? '(hidden)' : '(unset: derived from the key-hash secret)' }
    else if (name === 'databaseUrl' || name === 'redisUrl') out[name] = value === undefined ? describeEmbedded(name, config.dataDir) : withoutPassword(value as string)
    else out[name] = value
  }
  return out
}

function describeSecret(name: keyof Config, value: string | undefined, dataDir: string): string {
  // The ids as the keyring reads them (validated at load): a bare key has none of its own, it is `k1`.
  if (name === 'masterKey' && value) return `(hidden; key ids ${parseKeyring(value).ids.join(', ')}, the first encrypts)`
  if (value) return '(hidden)'
  if (name === 'masterKey' || name === 'keyHashSecret') return `(unset: generated once into ${dataDir}/secrets.json)`
  return '(unset)'
}

function describeEmbedded(name: 'databaseUrl' | 'redisUrl', dataDir: string): string {
  return name === 'databaseUrl' ? `(unset: embedded PGlite under ${dataDir}/pglite)` : '(unset: rate windows in process)'
}

/**
 * pg and ioredis take query parameters as options too (`?password=`, ioredis's `sentinelPassword`,
 * libpq's `sslpassword`); `sslkey` is a file path, not the key.
 */
const SECRET_PARAM = /password|passphrase|secret/i

function withoutPassword(url: string): string {
  try {
    const parsed = new URL(url)
    if (parsed.password) parsed.password = 'hidden'
    for (const name of new Set(parsed.searchParams.keys())) if (SECRET_PARAM.test(name)) parsed.searchParams.set(name, 'hidden')
    return parsed.toString()
  } catch {
    return '(unparsable URL, hidden)'
  }
}
