import type { Logger } from 'pino'
import { applicationsService, type ApplicationsService } from './applications/service.js'
import { keyHasher, type KeyHasher } from './auth/api-keys.js'
import { createAuthenticator, type Authenticator } from './auth/authenticator.js'
import { applicationLookup } from './auth/application-lookup.js'
import type { Config } from './config/index.js'
import type { Secrets } from './config/secrets.js'
import { createRateLimiter, type RateLimiter } from './ratelimit/index.js'
import { openStore, type Store } from './store/index.js'
import type { OpenDatabaseOptions } from './store/database.js'
import { tenantsService, type TenantsService } from './tenants/service.js'

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
  close(): Promise<void>
}

export async function openServices(config: Config, logger: Logger, secrets: Pick<Secrets, 'masterKey' | 'keyHashSecret'>, dbOptions: OpenDatabaseOptions = {}): Promise<Services> {
  const limiter = createRateLimiter({ config, logger })
  const store = await openStore(config, dbOptions)
  const hasher = keyHasher(secrets.keyHashSecret)
  const authenticator = createAuthenticator({ db: store.db, hasher, logger, lookups: [applicationLookup(store)] })
  await authenticator.start()
  const applications = applicationsService({ store, hasher, authenticator })
  const tenants = tenantsService({ store, hasher })
  await tenants.bootstrap(config.bootstrapApiKey, logger)

  const sweep = setInterval(() => {
    applications.sweepExpired().catch((err: unknown) => logger.error({ err }, 'expiry sweep failed'))
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
    async close() {
      if (closed) return
      closed = true
      clearInterval(sweep)
      await limiter.close()
      await store.db.close()
    },
  }
}
