import { Type, type Static, type TString } from '@sinclair/typebox'
import { defaultRates, rateScopes, rateVariable, type RateVariable } from './rate-scopes.js'

/** A rate's bounds, which loadConfig checks (a pattern cannot compare numbers): past them a window's arithmetic overflows (`RateLimit-Reset: Infinity`). */
export const RATE_MAX = { limit: 1_000_000_000, windowSeconds: 86_400 } as const
const rate = Type.String({ pattern: '^[1-9][0-9]*/[1-9][0-9]*$', description: `<count>/<seconds>, at most ${RATE_MAX.limit}/${RATE_MAX.windowSeconds}` })
const positiveInt = (min: number, max: number, dflt: number) => Type.Integer({ minimum: min, maximum: max, default: dflt })
// `enum`, not a union of literals: one error listing the allowed values instead of one per value.
const oneOf = <const T extends readonly string[]>(values: T, dflt: T[number]) => Type.Unsafe<T[number]>({ type: 'string', enum: [...values], default: dflt })
const rateVariables = Object.fromEntries(rateScopes.map((scope) => [rateVariable(scope), Type.String({ ...rate, default: defaultRates[scope] })])) as Record<RateVariable, TString>

/**
 * Every environment variable Tessera reads, with its default. Values arrive as strings and are
 * coerced by ajv (`coerceTypes`), so `PORT=abc` is reported rather than silently becoming NaN;
 * loadConfig first drops blank values and refuses integers not in decimal digits, which ajv would coerce.
 */
export const configSchema = Type.Object(
  {
    PORT: positiveInt(0, 65535, 3000),
    HOST: Type.String({ minLength: 1, default: '127.0.0.1' }),
    DATABASE_URL: Type.Optional(Type.String({ pattern: '^postgres(ql)?://' })),
    REDIS_URL: Type.Optional(Type.String({ pattern: '^rediss?://' })),
    SVC_DATA_DIR: Type.String({ minLength: 1, default: './data' }),
    SVC_MASTER_KEY: Type.Optional(Type.String({ minLength: 1 })),
    // A management key: `tsr_mgmt_` (or the older `key_`) + at least 32 base62 characters.
    SVC_BOOTSTRAP_API_KEY: Type.Optional(Type.String({ pattern: '^(tsr_mgmt_|key_)[A-Za-z0-9]{32,}$' })),
    SVC_OPERATOR_KEY: Type.Optional(Type.String({ minLength: 32 })),
    SVC_KEY_HASH_SECRET: Type.Optional(Type.String({ minLength: 32 })),
    SVC_LOG_LEVEL: oneOf(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], 'info'),
    SVC_BODY_LIMIT_BYTES: positiveInt(1, 1024 * 1024 * 1024, 5 * 1024 * 1024),
    SVC_BODY_MAX_JSON_VALUES: positiveInt(1, 100_000_000, 100_000),
    SVC_BODY_BYTES_IN_FLIGHT: Type.Optional(Type.Integer({ minimum: 1, maximum: 64 * 1024 * 1024 * 1024, description: 'default: 256 MiB, or the larger body limit if that is larger' })),
    SVC_PROXY_TIMEOUT_MS: positiveInt(1, 600_000, 25_000),
    SVC_PROXY_ALLOW_HTTP: Type.Boolean({ default: false }),
    SVC_PROXY_ALLOW_PRIVATE: Type.Boolean({ default: false }),
    SVC_MAX_EXPRESSION_TOKENS: positiveInt(1, 10_000, 100),
    SVC_REACTOR_TIMEOUT_MS: positiveInt(1, 600_000, 30_000),
    SVC_REACTOR_MEMORY_MB: positiveInt(8, 4096, 128),
    SVC_REACTOR_HOT_CONCURRENCY: positiveInt(0, 1000, 1),
    SVC_REACTOR_CODE_MAX_CHARS: positiveInt(1, 10_000_000, 50_000),
    SVC_REACTOR_PAYLOAD_MAX_BYTES: positiveInt(1, 1024 * 1024 * 1024, 5 * 1024 * 1024),
    SVC_REACTOR_BRIDGE_CONCURRENCY: positiveInt(1, 1000, 8),
    SVC_REACTOR_BRIDGE_ANSWER_MAX_BYTES: Type.Optional(Type.Integer({ minimum: 1, maximum: 16 * 1024 * 1024 * 1024, description: 'default: 4 x SVC_REACTOR_PAYLOAD_MAX_BYTES' })),
    SVC_REACTOR_WORKERS: Type.Optional(Type.Integer({ minimum: 1, maximum: 64, description: 'default: the cores this process may run on (at most 64)' })),
    SVC_REACTOR_CONCURRENCY_TOTAL: positiveInt(1, 10_000, 32),
    SVC_REACTOR_CONCURRENCY_PER_TENANT: positiveInt(1, 10_000, 16),
    SVC_REACTOR_CONCURRENCY_PER_REACTOR: positiveInt(1, 10_000, 8),
    SVC_REACTOR_CONCURRENCY_PER_TENANT_SLOW: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_000, description: 'default: half the cores (at least 1, at most the per-tenant cap)' })),
    SVC_REACTOR_SLOW_CALL_MS: positiveInt(1, 600_000, 250),
    SVC_REACTOR_QUEUE_TOTAL: positiveInt(0, 100_000, 256),
    SVC_REACTOR_QUEUE_PER_TENANT: positiveInt(0, 100_000, 64),
    SVC_REACTOR_QUEUE_TIMEOUT_MS: positiveInt(0, 600_000, 1000),
    SVC_REACTOR_WARM_PER_REACTOR: positiveInt(0, 1000, 8),
    SVC_REACTOR_WARM_TOTAL: positiveInt(0, 100_000, 64),
    SVC_REACTOR_WARM_IDLE_MS: positiveInt(0, 86_400_000, 60_000),
    ...rateVariables,
    SVC_RATE_LIMIT_BLOCK_SECONDS: positiveInt(1, 86_400, 10),
    SVC_RATE_LIMIT_ENABLED: Type.Boolean({ default: true }),
    SVC_RATE_LIMIT_KEY_PREFIX: Type.String({ pattern: '^[A-Za-z0-9:_.-]{1,64}$', default: 'tessera:rl:' }),
    SVC_REDIS_COMMAND_TIMEOUT_MS: positiveInt(1, 60_000, 250),
    // Comma-separated IP addresses and CIDR ranges; each entry is checked by loadConfig.
    SVC_TRUSTED_PROXIES: Type.String({ default: '' }),
    // Comma-separated origins (or `*`) browsers may call from; each entry is checked by loadConfig.
    SVC_CORS_ORIGINS: Type.String({ default: '' }),
    SVC_RATE_LIMIT_IPV6_PREFIX: positiveInt(1, 128, 64),
    SVC_RATE_LIMIT_LEASE_PERCENT: positiveInt(0, 10, 1),
    SVC_EXPIRY_SWEEP_SECONDS: positiveInt(1, 86_400, 60),
    SVC_SHUTDOWN_GRACE_MS: positiveInt(0, 600_000, 10_000),
    SVC_DB_STATEMENT_TIMEOUT_MS: positiveInt(100, 600_000, 5_000),
    SVC_DB_ACQUIRE_TIMEOUT_MS: positiveInt(100, 600_000, 3_000),
    SVC_DB_POOL_MAX: positiveInt(1, 1000, 10),
    SVC_READY_TIMEOUT_MS: positiveInt(50, 60_000, 2_000),
    SVC_DB_LISTENER_BACKOFF_MAX_MS: positiveInt(100, 600_000, 10_000),
    SVC_AUDIT_SECRET: Type.Optional(Type.String({ pattern: '^[^,\\s]{32,}(,[^,\\s]{32,})*$', description: 'comma-separated secrets of >= 32 chars; the first seals' })),
    SVC_AUDIT_ENABLED: Type.Boolean({ default: true, description: 'false: no audit events are written (benchmarks only; never for card data)' }),
    SVC_AUDIT_RETENTION_DAYS: positiveInt(1, 36_500, 400),
    SVC_AUDIT_WRITE_TIMEOUT_MS: positiveInt(1, 60_000, 3000),
    SVC_AUDIT_QUEUE_MAX_EVENTS: positiveInt(1, 1_000_000, 20_000),
    SVC_AUDIT_BATCH_MAX_EVENTS: positiveInt(1, 2000, 1000),
    SVC_AUDIT_CHECKPOINT_EVERY: positiveInt(1, 10_000_000, 10_000),
    SVC_AUDIT_MAINTENANCE_SECONDS: positiveInt(1, 86_400, 3600),
    SVC_AUDIT_PRUNE_IN_SERVICE: Type.Boolean({ default: true }),
    // off: no /metrics; port: on SVC_METRICS_HOST:SVC_METRICS_PORT without a key; operator: on the API port with SVC_OPERATOR_KEY.
    SVC_METRICS: oneOf(['off', 'port', 'operator'], 'off'),
    SVC_METRICS_PORT: positiveInt(0, 65535, 9464),
    SVC_METRICS_HOST: Type.String({ minLength: 1, default: '127.0.0.1' }),
  },
  { additionalProperties: true },
)

export type RawConfig = Static<typeof configSchema>
