import { parseKeyring } from '../../vault/crypto/index.js'
import { rewrapAll, type RewrapFailure } from '../../vault/rewrap.js'
import { CliError, EXIT_FAILED, EXIT_USAGE } from '../cli-error.js'
import { cliConfig, cliSecret, withStore, type CliCommand, type CliContext } from '../context.js'
import { integerOption } from '../options.js'

export const command: CliCommand = {
  register(program, context) {
    const masterKey = program.command('master-key').description('rotate the master key (see the README: prepend the new key to SVC_MASTER_KEY, restart, re-wrap, remove the old one)')
    masterKey
      .command('rewrap')
      .description('re-wrap every data key (and the keyed-hash secret) under the first key of SVC_MASTER_KEY; safe while servers run, and to run again after an interruption')
      .option('--batch-size <n>', 'rows per batch', integerOption('--batch-size', 1, 10_000), 500)
      .action(async (options: { batchSize: number }) => {
        const config = cliConfig(context)
        const value = cliSecret(config, 'master_key')
        let keyring
        try {
          keyring = parseKeyring(value)
        } catch (err) {
          throw new CliError(`SVC_MASTER_KEY: ${err instanceof Error ? err.message : String(err)}`, EXIT_USAGE)
        }
        const started = Date.now()
        let total = 0
        const result = await withStore(config, (store) =>
          rewrapAll(store, keyring, {
            batchSize: options.batchSize,
            onStart: (n) => {
              total = n
              context.note(`${total} data key(s) to re-wrap under ${keyring.primaryId}`)
            },
            onBatch: (p) => context.note(`re-wrapped ${p.rewrapped}/${total} (${total === 0 ? 100 : Math.min(100, Math.round((p.rewrapped / total) * 100))}%), ${p.skipped} changed meanwhile`),
          }),
        )
        context.out(`done: ${result.rewrapped} data key(s) now under ${keyring.primaryId} in ${Date.now() - started} ms`)
        if (result.failed.length) throw incomplete(result.failed, keyring.primaryId, context)
      })
  },
}

const LISTED_FAILURES = 1000

/** Names every token left behind (ids and the cause, never data), so they can be repaired or restored. */
function incomplete(failed: RewrapFailure[], primaryId: string, context: CliContext): CliError {
  for (const f of failed.slice(0, LISTED_FAILURES)) {
    const cause = f.reason === 'unknown_key' ? `master key ${f.keyId} is not configured` : f.reason === 'malformed' ? `its wrapped key under ${f.keyId} is malformed` : `its wrapped key does not decrypt under ${f.keyId}`
    context.note(`not re-wrapped: tenant ${f.tenantId} token ${f.tokenId}: ${cause}`)
  }
  if (failed.length > LISTED_FAILURES) context.note(`... and ${failed.length - LISTED_FAILURES} more`)
  const oldIds = [...new Set(failed.map((f) => f.keyId))].join(', ')
  return new CliError(
    `${failed.length} data key(s) could not be re-wrapped under ${primaryId} (listed above); every other one was. Do not remove ${oldIds} from SVC_MASTER_KEY: these tokens are still under it. Repair or restore those rows, or delete the tokens, then run the command again.`,
    EXIT_FAILED,
  )
}
