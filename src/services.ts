import type { Logger } from 'pino'
import { applicationsService, type ApplicationsService } from './applications/service.js'
import { keyHasher, type KeyHasher } from './auth/api-keys.js'
import { createAuthenticator, type Authenticator } from './auth/authenticator.js'
import { applicationLookup } from './auth/application-lookup.js'
import type { Config } from './config/index.js'
import type { Secrets } from './config/secrets.js'
import { createRateLimiter, type RateLimiter } from './ratelimit/index.js'
import { openStore, type Store } from './store/index.js'
import { createEphemeralProxy } from './proxy/ephemeral-proxy.js'
import { createForwarder } from './proxy/forward.js'
import type { ProxyService } from './proxy/service.js'
import { proxiesService, type ProxiesService } from './proxies/service.js'
import type { OpenDatabaseOptions } from './store/database.js'
import { tenantsService, type TenantsService } from './tenants/service.js'
import { sessionLookup, sessionsService, type SessionsService } from './vault/sessions.js'
import { tokenService, type TokenService } from './vault/token-service.js'
import { createTokenCache } from './vault/token-cache.js'
import { presentToken } from './http/presenters/tokens.js'
import { reactorBridges } from './reactors/bridges.js'
import { createReactorCache } from './reactors/reactor-cache.js'
import { reactorActor, reactorsService, type ReactorsService } from './reactors/service.js'
import { ReactorSupervisor } from './reactors/supervisor.js'
import { openVaultKeys, type VaultKeys } from './vault/vault-keys.js'
import { createTenantSettingsCache, invalidatingSettings, type TenantSettingsCache } from './tenants/settings-cache.js'

/** Everything a running Tessera holds open; `buildApp` wires HTTP onto it, `close` releases it. */
export interface Services {
  config: Config
  logger: Logger
  store: Store
  hasher: KeyHasher
  authenticator: Authenticator
  applications: ApplicationsService
  tenants: TenantsService
  limiter: RateLimiter
  tenantSettings: TenantSettingsCache
  proxy: ProxyService
  keys: VaultKeys
  tokens: TokenService
  sessions: SessionsService
  supervisor: ReactorSupervisor
  reactors: ReactorsService
  proxies: ProxiesService
  close(): Promise<void>
}

export async function openServices(config: Config, logger: Logger, secrets: Pick<Secrets, 'masterKey' | 'keyHashSecret'>, dbOptions: OpenDatabaseOptions = {}): Promise<Services> {
  const limiter = createRateLimiter({ config, logger })
  const store = await openStore(config, dbOptions)
  const hasher = keyHasher(secrets.keyHashSecret)
  const authenticator = createAuthenticator({ db: store.db, hasher, logger, lookups: [applicationLookup(store), sessionLookup(store)] })
  await authenticator.start()
  const applications = applicationsService({ store, hasher, authenticator })
  const tenantSettings = createTenantSettingsCache({ db: store.db, load: (id) => store.tenants.findById(id) })
  await tenantSettings.start()
  const tenants = invalidatingSettings(tenantsService({ store, hasher }), tenantSettings)
  await tenants.bootstrap(config.bootstrapApiKey, logger)

  const keys = await openVaultKeys(store, secrets.masterKey, logger)
  const tokenCache = createTokenCache(store.db)
  await tokenCache.start()
  const tokens = tokenService(store, keys, tokenCache)
  const sessions = sessionsService({ store, hasher, authenticator })

  const forwarder = createForwarder(config.proxy)
  const proxy = createEphemeralProxy({ forwarder, vault: tokens, config })
  // The runtime child starts on the first compile or invocation, not with the server.
  const supervisor = new ReactorSupervisor({
    config: config.reactors,
    logger,
    bridges: reactorBridges({ store, keys, tokens, forwarder, config, present: presentToken }),
  })
  const reactorCache = createReactorCache({ db: store.db, loadReactor: (tenantId, id) => store.reactors.findById(tenantId, id), loadActor: (reactor) => reactorActor(store, reactor) })
  await reactorCache.start()
  authenticator.onInvalidate((keyHash) => reactorCache.dropActor(keyHash))
  const reactors = reactorsService({ store, keys, tokens, supervisor, config, present: presentToken, cache: reactorCache })
  const proxies = proxiesService({ store, hasher, supervisor, forwarder, tokens, config })
  await proxies.start()
  authenticator.onInvalidate((keyHash) => proxies.dropActor(keyHash))

  // Expired Applications, sessions and tokens already fail at once; the sweep only reclaims rows.
  const sweep = setInterval(() => {
    Promise.all([applications.sweepExpired(), sessions.sweepExpired(), store.tokens.deleteExpired(new Date())]).catch((err: unknown) =>
      logger.error({ err }, 'expiry sweep failed'),
    )
  }, config.expirySweepSeconds * 1000)
  sweep.unref()

  let closed = false
  return {
    config,
    logger,
    store,
    hasher,
    authenticator,
    applications,
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
    async close() {
      if (closed) return
      closed = true
      clearInterval(sweep)
      await limiter.close()
      await supervisor.close()
      await forwarder.close()
      await store.db.close()
    },
  }
}

