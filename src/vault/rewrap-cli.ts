import { loadConfig } from '../config/index.js'
import { resolveSecrets } from '../config/secrets.js'
import { openStore } from '../store/index.js'
import { parseKeyring } from './crypto/index.js'
import { rewrapAll } from './rewrap.js'

/**
 * `npm run rewrap-keys`: after prepending a new key to SVC_MASTER_KEY (and restarting the
 * servers so they encrypt with it), re-wrap every existing data key under it. Safe to run while
 * the servers run, and to run again after an interruption. Then the old key can be removed.
 */
async function main(): Promise<void> {
  const config = loadConfig()
  const keyring = parseKeyring(resolveSecrets(config).masterKey)
  const store = await openStore(config)
  try {
    const started = Date.now()
    const result = await rewrapAll(store, keyring, {
      onBatch: (p) => process.stdout.write(`re-wrapped ${p.rewrapped} data keys under ${keyring.primaryId} (${p.skipped} changed meanwhile)\n`),
    })
    process.stdout.write(`done: ${result.rewrapped} data keys now under ${keyring.primaryId} in ${Date.now() - started} ms\n`)
  } finally {
    await store.db.close()
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`rewrap failed: ${err instanceof Error ? err.message : String(err)}\n`)
  process.exit(1)
})
