import { Ajv } from 'ajv'
import { configSchema, type RawConfig } from './schema.js'

export type RateScope = 'global' | 'portal' | 'tokens_search' | 'tokens_list' | 'tokens_create'
export const rateScopes: readonly RateScope[] = ['global', 'portal', 'tokens_search', 'tokens_list', 'tokens_create']

export interface RateRule {
  limit: number
  windowSeconds: number
}

export interface Config {
  port: number
  host: string
  databaseUrl: string | undefined
  redisUrl: string | undefined
  dataDir: string
  /** Raw `SVC_MASTER_KEY`; parsed by the vault's keyring. */
  masterKey: string | undefined
  bootstrapApiKey: string | undefined
  operatorKey: string | undefined
  keyHashSecret: string | undefined
  logLevel: RawConfig['SVC_LOG_LEVEL']
  bodyLimitBytes: number
  expirySweepSeconds: number
  shutdownGraceMs: number
  proxy: { timeoutMs: number; allowHttp: boolean; allowPrivate: boolean }
  expressions: { maxTokens: number }
  reactors: {
    timeoutMs: number
    memoryMb: number
    hotConcurrency: number
    codeMaxChars: number
    payloadMaxBytes: number
    workers: number
  }
  rateLimit: {
    enabled: boolean
    blockSeconds: number
    /** Prefix of every Redis key, so deployments can share one Redis. */
    keyPrefix: string
    redisCommandTimeoutMs: number
    trustedProxies: string[]
    scopes: Record<RateScope, RateRule>
  }
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n  - ${problems.join('\n  - ')}`)
    this.name = 'ConfigError'
  }
}

const ajv = new Ajv({ coerceTypes: true, useDefaults: true, allErrors: true, strict: false })
const validate = ajv.compile<RawConfig>(configSchema)

/** Validates every variable at once and returns a frozen Config; throws ConfigError listing all problems. */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const raw: Record<string, unknown> = {}
  for (const key of Object.keys(configSchema.properties)) {
    const value = env[key]
    if (value !== undefined && value !== '') raw[key] = value
  }
  if (!validate(raw)) {
    throw new ConfigError((validate.errors ?? []).map((e) => `${e.instancePath.slice(1) || 'config'} ${e.message ?? 'is invalid'}${e.params && 'allowedValues' in e.params ? ` (${String(e.params.allowedValues)})` : ''}`))
  }
  const r = raw as RawConfig
  return deepFreeze({
    port: r.PORT,
    host: r.HOST,
    databaseUrl: r.DATABASE_URL,
    redisUrl: r.REDIS_URL,
    dataDir: r.SVC_DATA_DIR,
    masterKey: r.SVC_MASTER_KEY,
    bootstrapApiKey: r.SVC_BOOTSTRAP_API_KEY,
    operatorKey: r.SVC_OPERATOR_KEY,
    keyHashSecret: r.SVC_KEY_HASH_SECRET,
    logLevel: r.SVC_LOG_LEVEL,
    bodyLimitBytes: r.SVC_BODY_LIMIT_BYTES,
    expirySweepSeconds: r.SVC_EXPIRY_SWEEP_SECONDS,
    shutdownGraceMs: r.SVC_SHUTDOWN_GRACE_MS,
    proxy: { timeoutMs: r.SVC_PROXY_TIMEOUT_MS, allowHttp: r.SVC_PROXY_ALLOW_HTTP, allowPrivate: r.SVC_PROXY_ALLOW_PRIVATE },
    expressions: { maxTokens: r.SVC_MAX_EXPRESSION_TOKENS },
    reactors: {
      timeoutMs: r.SVC_REACTOR_TIMEOUT_MS,
      memoryMb: r.SVC_REACTOR_MEMORY_MB,
      hotConcurrency: r.SVC_REACTOR_HOT_CONCURRENCY,
      codeMaxChars: r.SVC_REACTOR_CODE_MAX_CHARS,
      payloadMaxBytes: r.SVC_REACTOR_PAYLOAD_MAX_BYTES,
      workers: r.SVC_REACTOR_WORKERS,
    },
    rateLimit: {
      enabled: r.SVC_RATE_LIMIT_ENABLED,
      blockSeconds: r.SVC_RATE_LIMIT_BLOCK_SECONDS,
      keyPrefix: r.SVC_RATE_LIMIT_KEY_PREFIX,
      redisCommandTimeoutMs: r.SVC_REDIS_COMMAND_TIMEOUT_MS,
      trustedProxies: r.SVC_TRUSTED_PROXIES.split(',').map((s) => s.trim()).filter(Boolean),
      scopes: {
        global: parseRate(r.SVC_RATE_LIMIT_GLOBAL),
        portal: parseRate(r.SVC_RATE_LIMIT_PORTAL),
        tokens_search: parseRate(r.SVC_RATE_LIMIT_TOKENS_SEARCH),
        tokens_list: parseRate(r.SVC_RATE_LIMIT_TOKENS_LIST),
        tokens_create: parseRate(r.SVC_RATE_LIMIT_TOKENS_CREATE),
      },
    },
  })
}

function parseRate(value: string): RateRule {
  const [limit, seconds] = value.split('/').map(Number)
  return { limit: limit ?? 1, windowSeconds: seconds ?? 1 }
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const v of Object.values(value)) deepFreeze(v)
    Object.freeze(value)
  }
  return value
}

/** A Config for tests: defaults plus overrides, validated the same way. */
export function testConfig(env: Record<string, string> = {}): Config {
  return loadConfig({ SVC_LOG_LEVEL: 'silent', PORT: '0', ...env })
}
