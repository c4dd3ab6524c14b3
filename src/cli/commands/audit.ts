import { runAuditPrune } from '../../audit/prune-cli.js'
import { runAuditVerify } from '../../audit/verify-cli.js'
import type { ExpectedEntry } from '../../audit/verify.js'
import { CliError, EXIT_FAILED, EXIT_USAGE, failureMessage } from '../cli-error.js'
import { cliConfig, type CliCommand } from '../context.js'
import { integerOption } from '../options.js'
import { isUuid } from '../../shapes/ids.js'

/** `tessera audit verify` and `tessera audit prune` (also `npm run audit-verify` / `audit-prune`). */
export const command: CliCommand = {
  register(program, context) {
    const audit = program.command('audit').description('check and prune the tamper-evident audit log (see the README, "Audit log")')
    audit
      .command('verify')
      .description('check every tenant\'s audit hash chain and checkpoints (read only); exit 0 intact, 1 broken (the first broken link is named), 2 it could not run (usage, configuration, database)')
      .option('--tenant <id>', 'check one tenant only')
      .option('--retention-days <n>', 'retention the chains were pruned with (default SVC_AUDIT_RETENTION_DAYS)', integerOption('--retention-days', 1, 36_500))
      .option('--json', 'print the verification as JSON')
      .option('--expect <seq:hash>', 'with --tenant: an entry the chain must still hold (its seq and hash, from an export or a SIEM); catches the newest entries deleted with the head moved back', expectedEntry)
      .action(async (options: { tenant?: string; retentionDays?: number; json?: boolean; expect?: ExpectedEntry }) => {
        if (options.tenant !== undefined && !isUuid(options.tenant)) throw new CliError('--tenant must be a tenant id (uuid)', EXIT_USAGE)
        if (options.expect && options.tenant === undefined) throw new CliError('--expect needs --tenant: a seq and hash belong to one tenant\'s chain', EXIT_USAGE)
        const config = cliConfig(context)
        // 1 means broken, so a verification that could not run (database, secrets) is 2.
        const code = await runAuditVerify({ tenantId: options.tenant, retentionDays: options.retentionDays, json: options.json, expect: options.expect }, context.out, config).catch((err: unknown) => {
          throw new CliError(`audit verify could not run: ${failureMessage(err)}`, EXIT_USAGE)
        })
        if (code !== 0) throw new CliError('the audit log failed verification', EXIT_FAILED)
      })
    audit
      .command('prune')
      .description('remove audit entries older than SVC_AUDIT_RETENTION_DAYS, up to each tenant\'s newest checkpoint before that (for a role with DELETE when SVC_AUDIT_PRUNE_IN_SERVICE=false); exit 0 done, 1 failed')
      .action(async () => {
        const removed = await runAuditPrune(cliConfig(context))
        context.out(`removed ${removed} audit entries older than the retention period`)
      })
  },
}

function expectedEntry(value: string): ExpectedEntry {
  const match = /^([1-9][0-9]{0,14}):([0-9a-f]{64})$/.exec(value.trim())
  if (!match) throw new CliError('--expect must be <seq>:<hash>, the hash as 64 lower-case hex digits (as GET /logs/export prints it)', EXIT_USAGE)
  return { seq: Number(match[1]), hash: match[2]! }
}
