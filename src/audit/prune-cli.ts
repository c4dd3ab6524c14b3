import { loadConfig, type Config } from '../config/index.js'
import { openStore } from '../store/index.js'
import { pruneExpired } from './maintenance.js'

/**
 * `tessera audit prune` (`npm run audit-prune` is an alias): removes audit entries older than SVC_AUDIT_RETENTION_DAYS, up to each
 * tenant's newest checkpoint older than that (the servers write checkpoints). For deployments
 * whose service role holds no DELETE on the audit tables (SVC_AUDIT_PRUNE_IN_SERVICE=false):
 * run it from cron with a DATABASE_URL of a role that does. Returns the entries removed.
 */
export async function runAuditPrune(config: Config = loadConfig(), now = new Date()): Promise<number> {
  const store = await openStore(config, { migrate: false })
  try {
    return await pruneExpired(store.audit, config.audit.retentionDays, now)
  } finally {
    await store.db.close()
  }
}
