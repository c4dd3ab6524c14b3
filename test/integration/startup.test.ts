import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import t from 'tap'
import { generateApiKey } from '../../src/auth/api-keys.js'
import { testConfig } from '../../src/config/index.js'
import { resolveSecrets } from '../../src/config/secrets.js'
import { createLogger } from '../../src/logger.js'
import { openServices } from '../../src/services.js'

t.test('a bad configuration exits non-zero naming every bad variable', async (t) => {
  const res = spawnSync(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    env: { PATH: process.env.PATH, PORT: 'x', SVC_BODY_LIMIT_BYTES: '-1' },
    encoding: 'utf8',
    timeout: 60_000,
  })
  t.equal(res.status, 2)
  t.match(res.stderr, /PORT/)
  t.match(res.stderr, /SVC_BODY_LIMIT_BYTES/)
})

t.test('embedded data survives a restart, and the bootstrap runs once', { skip: process.env.DATABASE_URL ? 'embedded only' : false }, async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tessera-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const key = generateApiKey()
  const config = testConfig({ SVC_DATA_DIR: dir, SVC_BOOTSTRAP_API_KEY: key })
  const secrets = resolveSecrets(config)
  t.same(secrets.generated.sort(), ['key_hash_secret', 'master_key'])
  const first = await openServices(config, createLogger(config), secrets)
  const principal = await first.authenticator.authenticate(key)
  await first.close()

  const again = resolveSecrets(config)
  t.same(again.generated, [], 'secrets are reused from the data dir')
  const second = await openServices(config, createLogger(config), again)
  t.teardown(() => second.close())
  t.equal((await second.authenticator.authenticate(key)).id, principal.id, 'same Application after restart')
  t.equal(await second.store.tenants.count(), 1, 'bootstrap did not run twice')
})
