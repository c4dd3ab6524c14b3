import { pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
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
 * `tessera audit verify` / `npm run audit-verify`: checks every tenant's audit chain (or one)
 * and prints the first broken link of each. Returns the exit code: 0 intact, 1 broken.
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

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { tenant: { type: 'string' }, 'retention-days': { type: 'string' }, json: { type: 'boolean', default: false } },
  })
  if (values.tenant !== undefined && !/^[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}$/i.test(values.tenant)) throw new Error('--tenant must be a tenant id (uuid)')
  const retention = values['retention-days'] === undefined ? undefined : Number(values['retention-days'])
  if (retention !== undefined && !(Number.isInteger(retention) && retention > 0)) throw new Error('--retention-days must be a positive integer')
  process.exitCode = await runAuditVerify({ tenantId: values.tenant, retentionDays: retention, json: values.json }, (line) => process.stdout.write(`${line}\n`))
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((err: unknown) => {
    process.stderr.write(`audit verify failed: ${err instanceof Error ? err.message : String(err)}\n`)
    process.exit(2)
  })
}
