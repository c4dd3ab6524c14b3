import type { Logger } from 'pino'
import { idempotencyService, type IdempotencyService } from './idempotency/service.js'
import { applicationsService, type ApplicationsService } from './applications/service.js'
import { applicationKeysService, type ApplicationKeysService } from './applications/keys-service.js'
import { auditKeyring } from './audit/audit-keys.js'
import { createAuditLog, type AuditLog } from './audit/audit-log.js'
import { apiKeyHasher, type ApiKeyHasher } from './auth/api-keys.js'
import { createAuthenticator, type Authenticator } from './auth/authenticator.js'
import { applicationLookup } from './auth/application-lookup.js'
import { systemClock, type Clock } from './clock.js'
import type { Config } from './config/index.js'
import { describeError } from './errors/index.js'
import { keyHashSecretSource, type Secrets } from './config/secrets.js'
import { createRateLimiter, type RateLimiter } from './ratelimit/index.js'
import { openStore, type Store } from './store/index.js'
import { createEphemeralProxy } from './proxy/ephemeral-proxy.js'
import { createForwarder } from './egress/forward.js'
import type { ProxyService } from './proxy/service.js'
import { preconfiguredProxiesService, type PreconfiguredProxiesService } from './proxies/service.js'
import type { OpenDatabaseOptions } from './store/database.js'
import { tenantsService, type TenantsService } from './tenants/service.js'
import { sessionLookup, sessionsService, type SessionsService } from './vault/sessions.js'
import { tokenService, type TokenService, type TokenView } from './vault/token-service.js'
import { createTokenCache } from './vault/token-cache.js'
import { reactorBridges } from './reactors/bridges.js'
import { createReactorCache } from './reactors/reactor-cache.js'
import { createCodeHost } from './reactors/code-host.js'
import { reactorsService, type ReactorsService } from './reactors/service.js'
import { ReactorSupervisor } from './reactors/supervisor.js'
import { openVaultKeys, type VaultKeys } from './vault/vault-keys.js'
import { checkKeyHashSecret } from './vault/key-hash-secret-check.js'
import { createTenantSettingsCache, type TenantSettingsCache } from './tenants/settings-cache.js'
import { createInvalidationBus, type InvalidationBus } from './cache/invalidation-bus.js'
import { createMetrics, type Metrics } from './metrics/metrics.js'
import { instrumentForwarder, instrumentLimiter, instrumentTokens } from './metrics/instrument.js'

/** How long after expiry the sweep leaves a row: the largest forward jump of a process's clock it survives. */
const SWEEP_GRACE_MS = 10 * 60 * 1000

/** Everything a running Tessera holds open; `buildApp` wires HTTP onto it, `close` releases it. */
export interface Services {
  config: Config
  logger: Logger
  /** This process's metrics registry (served at /metrics when SVC_METRICS is not off). */
  metrics: Metrics
  store: Store
  /** How every cache learns of changes, here and in the other processes. */
  bus: InvalidationBus
  /** The time every expiry decision reads. */
  clock: Clock
  hasher: ApiKeyHasher
  authenticator: Authenticator
  applications: ApplicationsService
  applicationKeys: ApplicationKeysService
  tenants: TenantsService
  limiter: RateLimiter
  tenantSettings: TenantSettingsCache
  proxy: ProxyService
  keys: VaultKeys
  tokens: TokenService
  sessions: SessionsService
  supervisor: ReactorSupervisor
  reactors: ReactorsService
  proxies: PreconfiguredProxiesService
  idempotency: IdempotencyService
  /** The shutdown deadline: destination and Reactor calls still running fail now (503, or 504 once sent). */
  abortInFlight(): Promise<void>
  audit: AuditLog
  /** Releases everything, each step bounded by `budget` (none: each step runs to its end). */
  close(budget?: CloseBudget): Promise<void>
}

/** How long each step of `close` may take; a step that overruns is left behind, never waited for. */
export interface CloseBudget {
  /** The rate limiter, the Reactor runtime, destination calls still running. */
  releaseMs: number
  /** Writing the audit entries still queued. */
  auditMs: number
  databaseMs: number
}

/**
 * How tokens are rendered when the domain hands them out (a Reactor's `tokenize` result): the
 * HTTP edge's presenter, passed in so that the domain never imports `http/`.
 */
export interface Rendering {
  presentToken: (view: TokenView) => unknown
}

export interface OpenServicesOptions extends OpenDatabaseOptions {
  /** What time it is for every expiry decision (tests move it); the system clock by default. */
  clock?: Clock
}

export async function openServices(config: Config, logger: Logger, secrets: Pick<Secrets, 'masterKey' | 'keyHashSecret'> & Partial<Pick<Secrets, 'generated'>>, rendering: Rendering, options: OpenServicesOptions = {}): Promise<Services> {
  const { clock = systemClock, ...dbOptions } = options
  const metrics = createMetrics()
  const store = await openStore(config, { logger, ...dbOptions, clock })
  // Before any key is hashed or any audit entry sealed with it.
  await checkKeyHashSecret(store, secrets.keyHashSecret, {
    source: keyHashSecretSource(config),
    generated: secrets.generated?.includes('key_hash_secret') === true,
    record: true,
  }).catch(async (err: unknown) => {
    await store.db.close()
    throw err
  })
  const limiter = instrumentLimiter(createRateLimiter({ config, logger }), metrics)
  const bus = createInvalidationBus(store.db, logger)
  const hasher = apiKeyHasher(secrets.keyHashSecret)
  const authenticator = createAuthenticator({ bus, hasher, logger, clock, lookups: [applicationLookup(store), sessionLookup(store)] })
  await authenticator.start()
  const applications = applicationsService({ store, hasher, authenticator, clock })
  const applicationKeys = applicationKeysService({ store, hasher, authenticator, applications })
  const tenantSettings = createTenantSettingsCache({ bus, load: (id) => store.tenants.findById(id) })
  await tenantSettings.start()
  const tenants = tenantsService({ store, hasher, settings: tenantSettings, logger })
  // Before the bootstrap: tenant `default` is recorded like any other before its key is shown.
  const audit = createAuditLog({ store, keyring: auditKeyring(config.audit.secret, secrets.keyHashSecret), config: config.audit, logger })
  await tenants.bootstrap(config.bootstrapApiKey, audit)

  const keys = await openVaultKeys(store, secrets.masterKey, logger)
  const tokenCache = createTokenCache(bus, clock)
  await tokenCache.start()
  const tokens = instrumentTokens(tokenService(store, keys, tokenCache, { renderMaxBytes: Math.max(config.bodyLimitBytes, config.reactors.payloadMaxBytes) }), metrics)
  const sessions = sessionsService({ store, hasher, authenticator, clock })

  const forwarder = instrumentForwarder(createForwarder(config.proxy), metrics)
  const proxy = createEphemeralProxy({ forwarder, vault: tokens, config })
  // The runtime child starts on the first compile or invocation, not with the server.
  const supervisor = new ReactorSupervisor({
    config: config.reactors,
    logger,
    bridges: reactorBridges({ store, keys, tokens, forwarder, config, present: rendering.presentToken, clock }),
  })
  const host = createCodeHost({ store, bus, runtime: supervisor, codeMaxChars: config.reactors.codeMaxChars })
  await host.start()
  const reactorCache = createReactorCache({
    bus,
    loadReactor: (tenantId, id) => store.reactors.findById(tenantId, id),
    loadActor: (reactor) => host.actor(reactor.tenant_id, reactor.application_id, reactor.bound_by),
  })
  await reactorCache.start()
  const reactors = reactorsService({ store, keys, tokens, host, config, present: rendering.presentToken, cache: reactorCache, clock, authenticator })
  const proxies = preconfiguredProxiesService({ store, bus, hasher, host, forwarder, tokens, config })
  await proxies.start()

  const auditMaintenance = setInterval(() => {
    audit.maintain().catch((err: unknown) => logger.error({ err }, 'audit maintenance failed'))
  }, config.audit.maintenanceSeconds * 1000)
  auditMaintenance.unref()

  // Answers are replayed for 24 h. A running request renews its claim every 40 s, so a retry
  // takes over a claim only 120 s after its process stopped (died), never a live one.
  const idempotency = idempotencyService(store, { ttlSeconds: 86_400, leaseSeconds: 120, secret: secrets.keyHashSecret })

  // Expired Applications, sessions, tokens and idempotency keys already fail (or are taken over)
  // at once; the sweep only reclaims rows, in batches, and only those expired ten minutes ago: a
  // process whose clock jumps ahead for a while must not delete for good what is still alive.
  // One working through a backlog may outlast the interval: the next tick then skips instead of
  // racing it for the same rows.
  let sweeping = false
  const sweep = setInterval(() => {
    if (sweeping) return
    sweeping = true
    const before = new Date(clock() - SWEEP_GRACE_MS)
    Promise.all([applications.sweepExpired(before), sessions.sweepExpired(before), store.tokens.deleteExpired(before), idempotency.pruneExpired()])
      .catch((err: unknown) => logger.error({ err: describeError(err) }, 'expiry sweep failed'))
      .finally(() => (sweeping = false))
  }, config.expirySweepSeconds * 1000)
  sweep.unref()

  metrics.watch({
    reactors: () => ({ ...supervisor.stats(), ...supervisor.load(), outcomes: supervisor.outcomeCounts() }),
    rateLimit: () => limiter.status(),
    database: () => store.db.stats(),
    audit: () => audit.stats(),
  })

  let closed = false
  return {
    config,
    logger,
    metrics,
    store,
    bus,
    clock,
    hasher,
    authenticator,
    applications,
    applicationKeys,
    tenants,
    limiter,
    tenantSettings,
    proxy,
    keys,
    tokens,
    sessions,
    supervisor,
    reactors,
    proxies,
    idempotency,
    async abortInFlight() {
      await Promise.all([forwarder.abort(), supervisor.close()])
    },
    audit,
    async close(budget) {
      if (closed) return
      closed = true
      clearInterval(sweep)
      clearInterval(auditMaintenance)
      // Calls still waiting on a destination (their caller may have left) are aborted, not waited
      // for: each notes its entry as it fails, and that must happen before the flush below.
      await closeStep(logger, 'release', budget?.releaseMs, [() => limiter.close(), () => supervisor.close(), () => forwarder.abort().then(afterCallers)])
      // After the server stopped taking requests: what they queued is written before the pool goes.
      await closeStep(logger, 'audit flush', budget?.auditMs, [() => audit.close()])
      await closeStep(logger, 'database', budget?.databaseMs, [() => store.db.close()])
    },
  }
}

/**
 * One step of `close`: it never throws and never outlasts `ms`, so that whatever it does, the
 * steps after it (the audit flush, the database) still run.
 */
async function closeStep(logger: Logger, step: string, ms: number | undefined, work: (() => Promise<unknown>)[]): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<'late'>((resolve) => (timer = ms === undefined ? undefined : setTimeout(resolve, ms, 'late')))
  // async: a part that throws at once is a rejection like any other, and the other parts still start.
  const done = Promise.allSettled(work.map(async (part) => part())).then((results) => {
    for (const r of results) if (r.status === 'rejected') logger.error({ err: describeError(r.reason), step }, 'closing failed')
  })
  const outcome = await Promise.race(ms === undefined ? [done] : [done, late]).finally(() => clearTimeout(timer))
  if (outcome === 'late') logger.warn({ step, ms }, 'closing took too long; going on without it')
}

/** A call's failure reaches its caller over a few promise hops; a macrotask turn lets them all run. */
const afterCallers = (): Promise<void> => new Promise((resolve) => setImmediate(resolve))

