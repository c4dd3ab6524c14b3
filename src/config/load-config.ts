import leven from 'leven'
import { availableParallelism } from 'node:os'
import { Ajv } from 'ajv'
import { parseRange } from '../ratelimit/client-ip.js'
import { KeyringError, parseKeyring } from '../vault/crypto/parse-keyring.js'
import { parseCorsOrigins } from './cors-origins.js'
import { mapScopes, rateScopes, rateVariable, type RateScope } from './rate-scopes.js'
import { runtimeChildEnv } from './runtime-env.js'
import { configSchema, RATE_MAX, type RawConfig } from './schema.js'

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
  /** Most JSON values one request body may hold (the parsed form of a body grows far past its bytes). */
  bodyMaxJsonValues: number
  /** Request-body bytes the process buffers at once, over every request (503 past it). */
  bodyBytesInFlight: number
  expirySweepSeconds: number
  shutdownGraceMs: number
  /** How long `/readyz` waits for each component before it reports it `down`. */
  readyTimeoutMs: number
  database: {
    /** Postgres `statement_timeout`; the client gives up 1 s later should the server not answer at all. */
    statementTimeoutMs: number
    /** Waiting for a pooled connection, and for a new one to connect. */
    acquireTimeoutMs: number
    poolMax: number
    /** Longest pause between attempts to re-establish the LISTEN connection. */
    listenerBackoffMaxMs: number
  }
  audit: {
    /** false (`SVC_AUDIT_ENABLED=false`): nothing is recorded; for measuring the log's cost only. */
    enabled: boolean
    /** Raw `SVC_AUDIT_SECRET`; unset: the audit keys derive from the key-hash secret. */
    secret: string | undefined
    retentionDays: number
    writeTimeoutMs: number
    queueMaxEvents: number
    batchMaxEvents: number
    checkpointEvery: number
    maintenanceSeconds: number
    /** false: a separate role prunes with `npm run audit-prune`, so the service's role needs no DELETE. */
    pruneInService: boolean
  }
  /** Where `GET /metrics` is served: nowhere, on a port of its own, or on the API port behind the operator key. */
  metrics: { mode: 'off' | 'port' | 'operator'; port: number; host: string }
  proxy: { timeoutMs: number; allowHttp: boolean; allowPrivate: boolean }
  /** Origins whose browser pages may call the API (`['*']`: any); empty: no CORS answers at all. */
  cors: { origins: readonly string[] }
  expressions: { maxTokens: number }
  reactors: {
    timeoutMs: number
    memoryMb: number
    hotConcurrency: number
    codeMaxChars: number
    payloadMaxBytes: number
    workers: number
    /** The runtime child's whole environment (an allow-list, see runtime-env.ts). */
    childEnv: Readonly<Record<string, string>>
    /**
     * The bridge calls (`fetch`, `req.svc.*`) of one invocation: how many the API process serves
     * at once (the rest wait, in order, inside the isolate) and how many bytes of answers it gets in all.
     */
    bridges: { concurrency: number; answerMaxBytes: number }
    /** Calls running at once (in this process's runtime): in all, per tenant, per Reactor. */
    concurrency: { total: number; perTenant: number; perReactor: number; perTenantSlow: number; slowCallMs: number }
    /** Calls waiting for a free slot: in all, per tenant, and for how long at most (then 503). */
    queue: { total: number; perTenant: number; timeoutMs: number }
    /** Warm isolates kept: per Reactor and in all; extras beyond hotConcurrency go after idleMs. */
    warm: { perReactor: number; total: number; idleMs: number }
  }
  rateLimit: {
    enabled: boolean
    blockSeconds: number
    /** Prefix of every Redis key, so deployments can share one Redis. */
    keyPrefix: string
    redisCommandTimeoutMs: number
    trustedProxies: string[]
    /** IPv6 clients are counted per network of this many bits (64: one bucket per /64). */
    ipv6PrefixLength: number
    /** Share of a scope's limit a process leases from Redis at once (0: a round trip per request; see ratelimit/stores/leases.ts). */
    leasePercent: number
    scopes: Record<RateScope, RateRule>
  }
}

const KNOWN = Object.keys(configSchema.properties)

/**
 * An `SVC_` variable the service does not read is almost always a misspelt one, and the
 * setting it meant then silently keeps its default (a limit, a time-out, a destination policy).
 */
function unknownVariables(env: Record<string, string | undefined>): string[] {
  return Object.keys(env)
    .filter((name) => name.startsWith('SVC_') && !KNOWN.includes(name) && env[name] !== undefined)
    .sort()
    .map((name) => {
      const near = KNOWN.map((known) => ({ known, distance: leven(name, known) })).sort((a, b) => a.distance - b.distance)[0]
      const hint = near && near.distance <= 3 ? ` (did you mean ${near.known}?)` : ''
      return `${name} is not a setting of this version${hint}; remove it or correct its name`
    })
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n  - ${problems.join('\n  - ')}`)
    this.name = 'ConfigError'
  }
}

const ajv = new Ajv({ coerceTypes: true, useDefaults: true, allErrors: true, strict: false })
const validate = ajv.compile<RawConfig>(configSchema)
/** ajv's coercion would also take " 80", "1e3", "0x10" or "1.0" (and a blank as 0). */
const DECIMAL = /^-?[0-9]+$/

/**
 * Validates every variable at once (the schema, then the parsers of structured values, then the
 * bounds that only make sense in order) and returns a frozen Config; throws ConfigError listing
 * every problem. A blank value (empty or only whitespace) is unset: its default applies.
 */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const set: Record<string, string> = {}
  const raw: Record<string, unknown> = {}
  const problems: string[] = []
  for (const [key, schema] of Object.entries(configSchema.properties)) {
    const value = env[key]
    if (value === undefined || value.trim() === '') continue
    set[key] = value
    if (schema.type === 'integer' && !DECIMAL.test(value)) problems.push(`${key} must be a whole number in decimal digits, not ${JSON.stringify(value)}`)
    else raw[key] = value
  }
  problems.push(...unknownVariables(env))
  if (!validate(raw)) problems.push(...(validate.errors ?? []).map(describeSchemaError))
  // Bounds are compared only once every value has its type.
  else if (problems.length === 0) problems.push(...orderingProblems(raw))
  problems.push(...valueProblems(set))
  if (problems.length > 0) throw new ConfigError(problems)
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
    bodyMaxJsonValues: r.SVC_BODY_MAX_JSON_VALUES,
    bodyBytesInFlight: r.SVC_BODY_BYTES_IN_FLIGHT ?? Math.max(256 * 1024 * 1024, r.SVC_BODY_LIMIT_BYTES, r.SVC_REACTOR_PAYLOAD_MAX_BYTES),
    expirySweepSeconds: r.SVC_EXPIRY_SWEEP_SECONDS,
    shutdownGraceMs: r.SVC_SHUTDOWN_GRACE_MS,
    readyTimeoutMs: r.SVC_READY_TIMEOUT_MS,
    database: {
      statementTimeoutMs: r.SVC_DB_STATEMENT_TIMEOUT_MS,
      acquireTimeoutMs: r.SVC_DB_ACQUIRE_TIMEOUT_MS,
      poolMax: r.SVC_DB_POOL_MAX,
      listenerBackoffMaxMs: r.SVC_DB_LISTENER_BACKOFF_MAX_MS,
    },
    audit: {
      enabled: r.SVC_AUDIT_ENABLED,
      secret: r.SVC_AUDIT_SECRET,
      retentionDays: r.SVC_AUDIT_RETENTION_DAYS,
      writeTimeoutMs: r.SVC_AUDIT_WRITE_TIMEOUT_MS,
      queueMaxEvents: r.SVC_AUDIT_QUEUE_MAX_EVENTS,
      batchMaxEvents: r.SVC_AUDIT_BATCH_MAX_EVENTS,
      checkpointEvery: r.SVC_AUDIT_CHECKPOINT_EVERY,
      maintenanceSeconds: r.SVC_AUDIT_MAINTENANCE_SECONDS,
      pruneInService: r.SVC_AUDIT_PRUNE_IN_SERVICE,
    },
    metrics: { mode: r.SVC_METRICS, port: r.SVC_METRICS_PORT, host: r.SVC_METRICS_HOST },
    proxy: { timeoutMs: r.SVC_PROXY_TIMEOUT_MS, allowHttp: r.SVC_PROXY_ALLOW_HTTP, allowPrivate: r.SVC_PROXY_ALLOW_PRIVATE },
    cors: { origins: parseCorsOrigins(r.SVC_CORS_ORIGINS) },
    expressions: { maxTokens: r.SVC_MAX_EXPRESSION_TOKENS },
    reactors: {
      timeoutMs: r.SVC_REACTOR_TIMEOUT_MS,
      memoryMb: r.SVC_REACTOR_MEMORY_MB,
      hotConcurrency: r.SVC_REACTOR_HOT_CONCURRENCY,
      codeMaxChars: r.SVC_REACTOR_CODE_MAX_CHARS,
      payloadMaxBytes: r.SVC_REACTOR_PAYLOAD_MAX_BYTES,
      // One worker thread per core the process may use (its CPU affinity, as taskset or a cpuset
      // sets it): more threads than cores only add context switches to every call.
      workers: r.SVC_REACTOR_WORKERS ?? Math.min(64, availableParallelism()),
      childEnv: runtimeChildEnv(env),
      bridges: { concurrency: r.SVC_REACTOR_BRIDGE_CONCURRENCY, answerMaxBytes: r.SVC_REACTOR_BRIDGE_ANSWER_MAX_BYTES ?? 4 * r.SVC_REACTOR_PAYLOAD_MAX_BYTES },
      concurrency: {
        total: r.SVC_REACTOR_CONCURRENCY_TOTAL,
        perTenant: r.SVC_REACTOR_CONCURRENCY_PER_TENANT,
        perReactor: r.SVC_REACTOR_CONCURRENCY_PER_REACTOR,
        perTenantSlow: r.SVC_REACTOR_CONCURRENCY_PER_TENANT_SLOW ?? Math.min(r.SVC_REACTOR_CONCURRENCY_PER_TENANT, Math.max(1, Math.floor(availableParallelism() / 2))),
        slowCallMs: r.SVC_REACTOR_SLOW_CALL_MS,
      },
      queue: { total: r.SVC_REACTOR_QUEUE_TOTAL, perTenant: r.SVC_REACTOR_QUEUE_PER_TENANT, timeoutMs: r.SVC_REACTOR_QUEUE_TIMEOUT_MS },
      warm: { perReactor: r.SVC_REACTOR_WARM_PER_REACTOR, total: r.SVC_REACTOR_WARM_TOTAL, idleMs: r.SVC_REACTOR_WARM_IDLE_MS },
    },
    rateLimit: {
      enabled: r.SVC_RATE_LIMIT_ENABLED,
      blockSeconds: r.SVC_RATE_LIMIT_BLOCK_SECONDS,
      keyPrefix: r.SVC_RATE_LIMIT_KEY_PREFIX,
      redisCommandTimeoutMs: r.SVC_REDIS_COMMAND_TIMEOUT_MS,
      trustedProxies: listEntries(r.SVC_TRUSTED_PROXIES),
      ipv6PrefixLength: r.SVC_RATE_LIMIT_IPV6_PREFIX,
      leasePercent: r.SVC_RATE_LIMIT_LEASE_PERCENT,
      scopes: mapScopes((scope) => parseRate(r[rateVariable(scope)])),
    },
  })
}

function describeSchemaError(e: NonNullable<typeof validate.errors>[number]): string {
  const allowed = Array.isArray(e.params.allowedValues) ? `: ${e.params.allowedValues.join(', ')}` : ''
  return `${e.instancePath.slice(1) || 'config'} ${e.message ?? 'is invalid'}${allowed}`
}

/**
 * Values with a structure of their own, checked by the parser that later reads them, so a bad one
 * stops the start (exit 2) rather than failing when the app is built. No message quotes key material.
 */
function valueProblems(set: Record<string, string | undefined>): string[] {
  const problems: string[] = []
  const masterKey = set.SVC_MASTER_KEY
  if (masterKey) {
    try {
      parseKeyring(masterKey)
    } catch (err) {
      if (!(err instanceof KeyringError)) throw err
      problems.push(...err.problems.map((p) => `SVC_MASTER_KEY: ${p}`))
    }
  }
  // The pattern names the scheme; the rest must parse too (a port past 65535, a bracket left
  // open), or the driver falls back to its defaults and fails later with another story. The
  // value is never quoted: it may hold a password.
  for (const name of ['DATABASE_URL', 'REDIS_URL'] as const) {
    const url = set[name]
    if (url?.trim() && !URL.canParse(url.trim())) problems.push(`${name} is not a valid URL (host, a port from 1 to 65535, percent-encoded user and password); its value is not shown`)
  }
  // The schema checks a rate's shape (a value it refuses parses to NaN here, past no bound).
  for (const name of rateScopes.map(rateVariable)) {
    const { limit, windowSeconds } = parseRate(set[name] ?? '1/1')
    if (limit > RATE_MAX.limit || windowSeconds > RATE_MAX.windowSeconds) problems.push(`${name} must have a count of at most ${RATE_MAX.limit} and a window of at most ${RATE_MAX.windowSeconds} seconds`)
  }
  const attempt = (parse: () => unknown) => {
    try {
      parse()
    } catch (err) {
      problems.push(err instanceof Error ? err.message : String(err))
    }
  }
  for (const entry of listEntries(set.SVC_TRUSTED_PROXIES ?? '')) attempt(() => parseRange(entry))
  attempt(() => parseCorsOrigins(set.SVC_CORS_ORIGINS ?? ''))
  return problems
}

function listEntries(value: string): string[] {
  return value.split(',').map((s) => s.trim()).filter(Boolean)
}

/**
 * Bounds that only make sense in order: a narrower cap above a wider one would be silently
 * meaningless, and hot isolates beyond the warm bounds could never be kept.
 */
function orderingProblems(r: RawConfig): string[] {
  const chains: Array<Array<[string, number]>> = [
    [['SVC_REACTOR_CONCURRENCY_PER_REACTOR', r.SVC_REACTOR_CONCURRENCY_PER_REACTOR], ['SVC_REACTOR_CONCURRENCY_PER_TENANT', r.SVC_REACTOR_CONCURRENCY_PER_TENANT], ['SVC_REACTOR_CONCURRENCY_TOTAL', r.SVC_REACTOR_CONCURRENCY_TOTAL]],
    [['SVC_REACTOR_CONCURRENCY_PER_TENANT_SLOW', r.SVC_REACTOR_CONCURRENCY_PER_TENANT_SLOW ?? 1], ['SVC_REACTOR_CONCURRENCY_PER_TENANT', r.SVC_REACTOR_CONCURRENCY_PER_TENANT]],
    [['SVC_REACTOR_QUEUE_PER_TENANT', r.SVC_REACTOR_QUEUE_PER_TENANT], ['SVC_REACTOR_QUEUE_TOTAL', r.SVC_REACTOR_QUEUE_TOTAL]],
    [['SVC_REACTOR_HOT_CONCURRENCY', r.SVC_REACTOR_HOT_CONCURRENCY], ['SVC_REACTOR_WARM_PER_REACTOR', r.SVC_REACTOR_WARM_PER_REACTOR], ['SVC_REACTOR_WARM_TOTAL', r.SVC_REACTOR_WARM_TOTAL]],
    // A budget smaller than one whole body would refuse that body every time.
    [['SVC_BODY_LIMIT_BYTES', r.SVC_BODY_LIMIT_BYTES], ['SVC_BODY_BYTES_IN_FLIGHT', r.SVC_BODY_BYTES_IN_FLIGHT ?? Infinity]],
    [['SVC_REACTOR_PAYLOAD_MAX_BYTES', r.SVC_REACTOR_PAYLOAD_MAX_BYTES], ['SVC_BODY_BYTES_IN_FLIGHT', r.SVC_BODY_BYTES_IN_FLIGHT ?? Infinity]],
  ]
  const problems: string[] = metricsProblems(r)
  for (const chain of chains) {
    for (let i = 1; i < chain.length; i++) {
      const [lowName, low] = chain[i - 1]!
      const [highName, high] = chain[i]!
      if (low > high) problems.push(`${lowName} (${low}) must not exceed ${highName} (${high})`)
    }
  }
  return problems
}

/** `/metrics` behind the operator key needs that key; on its own port, not the API's. */
function metricsProblems(r: RawConfig): string[] {
  if (r.SVC_METRICS === 'operator' && !r.SVC_OPERATOR_KEY) return ['SVC_METRICS=operator needs SVC_OPERATOR_KEY']
  if (r.SVC_METRICS === 'port' && r.SVC_METRICS_PORT !== 0 && r.SVC_METRICS_PORT === r.PORT) return [`SVC_METRICS_PORT (${r.SVC_METRICS_PORT}) must differ from PORT`]
  return []
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
