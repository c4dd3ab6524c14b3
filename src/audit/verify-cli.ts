import { loadConfig, type Config } from '../config/index.js'
import { requireSecret, SecretsError, secretsFile, storedSecret } from '../config/secrets.js'
import { openStore, type Store } from '../store/index.js'
import { auditKeyring, type AuditKeyring } from './audit-keys.js'
import { verifyAuditChain, type AuditVerification, type ExpectedEntry, type TenantChainReport } from './verify.js'

export interface AuditVerifyOptions {
  tenantId?: string
  retentionDays?: number
  json?: boolean
  expect?: ExpectedEntry
}

/**
 * `tessera audit verify` (src/cli/commands/audit.ts; `npm run audit-verify` is an alias): checks
 * every tenant's audit chain (or one) and prints the first broken link of each. Returns the exit code: 0 intact, 1 broken.
 * Needs the same SVC_KEY_HASH_SECRET / SVC_AUDIT_SECRET as the servers, and never generates one;
 * reads only (no migrations), so it can run as a read-only role. PGlite: stop the server first (one process).
 */
export async function runAuditVerify(options: AuditVerifyOptions, out: (line: string) => void, config: Config = loadConfig()): Promise<number> {
  const keyring = verifyKeyring(config)
  const store: Store = await openStore(config, { migrate: false })
  try {
    const verify = (k: AuditKeyring) => verifyAuditChain(store.audit, k, { retentionDays: options.retentionDays ?? config.audit.retentionDays, tenantId: options.tenantId, expect: options.expect })
    const result = await verify(keyring)
    if (hasUnknownKey(result)) await refuseWrongSecret(config, verify)
    if (options.json) out(JSON.stringify(result))
    else describe(result).forEach((line) => out(line))
    return result.ok ? 0 : 1
  } finally {
    await store.db.close()
  }
}

/** An auditor given SVC_AUDIT_SECRET needs no key-hash secret (entries sealed before it was set then show unknown_key). */
function verifyKeyring(config: Config): AuditKeyring {
  let keyHashSecret: string | undefined
  try {
    keyHashSecret = requireSecret(config, 'key_hash_secret')
  } catch (err) {
    if (!(err instanceof SecretsError) || !config.audit.secret?.trim()) throw err
  }
  return auditKeyring(config.audit.secret, keyHashSecret)
}

/**
 * A SVC_KEY_HASH_SECRET that is not the servers' makes every entry an unknown_key, which reads as
 * tampering. When the data dir's secrets.json holds another secret that yields every key the log
 * names, the variable is what is wrong: the verification could not run (exit 2), no false alarm.
 * Without such a file the two cannot be told apart, and the breaks are reported as they are.
 */
async function refuseWrongSecret(config: Config, verify: (k: AuditKeyring) => Promise<AuditVerification>): Promise<void> {
  const stored = storedSecret(config, 'key_hash_secret')
  if (!stored || !config.keyHashSecret || stored === config.keyHashSecret) return
  if (hasUnknownKey(await verify(auditKeyring(config.audit.secret, stored)))) return
  throw new Error(`SVC_KEY_HASH_SECRET is not the secret this audit log was sealed with (the key_hash_secret in ${secretsFile(config)} is): run with the servers' value`)
}

function hasUnknownKey(result: AuditVerification): boolean {
  return result.tenants.some((t) => t.break?.reason === 'unknown_key')
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
