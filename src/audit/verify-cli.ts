import { loadConfig, type Config } from '../config/index.js'
import { resolveSecrets } from '../config/secrets.js'
import { openStore, type Store } from '../store/index.js'
import { auditKeyring } from './audit-keys.js'
import { verifyAuditChain, type AuditVerification, type TenantChainReport } from './verify.js'

export interface AuditVerifyOptions {
  tenantId?: string
  retentionDays?: number
  json?: boolean
}

/**
 * `tessera audit verify` (src/cli/commands/audit.ts; `npm run audit-verify` is an alias): checks
 * every tenant's audit chain (or one) and prints the first broken link of each. Returns the exit code: 0 intact, 1 broken.
 * Needs the same SVC_KEY_HASH_SECRET / SVC_AUDIT_SECRET as the servers; reads only (no
 * migrations), so it can run as a read-only role. PGlite: stop the server first (one process).
 */
export async function runAuditVerify(options: AuditVerifyOptions, out: (line: string) => void, config: Config = loadConfig()): Promise<number> {
  const keyring = auditKeyring(config.audit.secret, resolveSecrets(config).keyHashSecret)
  const store: Store = await openStore(config, { migrate: false })
  try {
    const result = await verifyAuditChain(store.audit, keyring, { retentionDays: options.retentionDays ?? config.audit.retentionDays, tenantId: options.tenantId })
    if (options.json) out(JSON.stringify(result))
    else describe(result).forEach((line) => out(line))
    return result.ok ? 0 : 1
  } finally {
    await store.db.close()
  }
}

export function describe(result: AuditVerification): string[] {
  const lines = result.tenants.map(describeTenant)
  lines.push(result.tenants.length === 0 ? 'no audit entries' : result.ok ? `all ${result.tenants.length} chains intact` : 'AUDIT CHAIN BROKEN')
  return lines
}

function describeTenant(t: TenantChainReport): string {
  if (t.break) {
    const entry = t.break.entryId ? ` (entry ${t.break.entryId})` : ''
    return `BROKEN  tenant ${t.tenantId} at seq ${t.break.seq}${entry}: ${t.break.reason}: ${t.break.detail}`
  }
  const range = t.entries ? `entries ${t.firstSeq}..${t.lastSeq}` : 'no entries'
  const anchor = t.anchorSeq === null ? '' : `, verified from checkpoint ${t.anchorSeq}`
  return `ok      tenant ${t.tenantId}: ${range} (${t.entries}), ${t.checkpoints} checkpoints${anchor}`
}
