import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { ESLint } from 'eslint'
import t from 'tap'

const root = fileURLToPath(new URL('../../../', import.meta.url))
const eslint = new ESLint({ cwd: root })

/** The rule ids eslint reports for one import written into a (not existing) file at `file`. */
async function violations(file: string, source: string): Promise<string[]> {
  const [result] = await eslint.lintText(`${source}\nexport const probe = x\n`, { filePath: path.join(root, file) })
  return (result?.messages ?? []).filter((m) => m.ruleId === 'no-restricted-imports').map((m) => m.message)
}

const refused: Array<[string, string, RegExp]> = [
  ['src/vault/probe.ts', "import x from 'knex'", /Only src\/store\//],
  ['src/http/routes/probe.ts', "import type { x } from 'pg'", /Only src\/store\//],
  ['src/services-probe.ts', "import { x } from '@electric-sql/pglite'", /Only src\/store\//],
  ['src/cache/probe.ts', "import x from 'ioredis'", /Only src\/ratelimit\/stores\/redis\.ts/],
  ['src/store/probe.ts', "import x from 'ioredis'", /Only src\/ratelimit\/stores\/redis\.ts/],
  ['src/reactors/supervisor-probe.ts', "import x from 'isolated-vm'", /Only the runtime child/],
  ['src/reactors/runtime/host/probe.ts', "import type x from 'isolated-vm'", /Only the runtime child/],
  ['src/reactors/runtime/host/probe.ts', "import { x } from '../child/worker.js'", /runtime\/host\//],
  ['src/reactors/probe.ts', "import { x } from './runtime/child/child.js'", /runtime\/host\//],
  ['src/vault/probe.ts', "import { x } from '../http/presenters/tokens.js'", /never import http\//],
  ['src/proxy/plugins/probe.ts', "import { x } from '../../http/context.js'", /never import http\//],
  ['src/store/repositories/probe.ts', "import { x } from '../../http/cursor.js'", /never import http\//],
  ['src/store/repositories/probe.ts', "import type { x } from '../../vault/token-builder.js'", /never imports a feature folder/],
  ['src/cache/probe.ts', "import { x } from '../auth/principal.js'", /never imports a feature folder/],
  ['src/egress/probe.ts', "import type { x } from '../proxy/pipeline/index.js'", /egress\/\) serves the feature folders/],
  ['src/egress/probe.ts', "import { x } from '../reactors/bridges.js'", /egress\/\) serves the feature folders/],
  ['src/egress/probe.ts', "import { x } from '../http/context.js'", /never import http\//],
  ['src/reactors/runtime/child/probe.ts', "import { x } from '../host/connection.js'", /runtime child runs tenant code/],
  ['src/reactors/runtime/child/probe.ts', "import { x } from '../../scheduling/admission.js'", /runtime child runs tenant code/],
  ['src/reactors/runtime/child/probe.ts', "import { AppError } from '../../../errors/index.js'", /runtime child runs tenant code/],
  ['src/reactors/runtime/child/probe.ts', "import type { x } from '../../../vault/token-service.js'", /runtime child runs tenant code/],
  ['src/reactors/runtime/child/probe.ts', "import { x } from '../../../config/index.js'", /runtime child runs tenant code/],
  ['src/reactors/runtime/shared/probe.ts', "import { x } from '../../../errors/index.js'", /runtime\/shared\/ is loaded on both sides/],
  ['src/reactors/runtime/shared/probe.ts', "import { x } from '../host/outcome.js'", /runtime\/shared\/ is loaded on both sides/],
  ['src/reactors/runtime/host/probe.ts', "import { x } from '../../supervisor.js'", /runtime\/host\/ is owned by reactors\/supervisor\.ts/],
  ['src/reactors/runtime/host/probe.ts', "import { x } from '../../../vault/tokenize.js'", /runtime\/host\/ is owned by reactors\/supervisor\.ts/],
]

const allowed: Array<[string, string]> = [
  ['src/store/probe.ts', "import x from 'knex'"],
  ['src/cache/probe.ts', "import { x } from '../store/index.js'"],
  ['src/store/repositories/probe.ts', "import type { x } from '../../config/index.js'"],
  ['src/store/repositories/probe.ts', "import type { x } from 'pg'"],
  ['src/ratelimit/stores/redis.ts', "import x from 'ioredis'"],
  ['src/reactors/runtime/child/probe.ts', "import x from 'isolated-vm'"],
  ['src/reactors/runtime/child/probe.ts', "import { x } from '../shared/protocol.js'"],
  ['src/reactors/runtime/host/probe.ts', "import { x } from '../shared/protocol.js'"],
  ['src/reactors/runtime/host/probe.ts', "import { x } from '../../scheduling/warm-pool.js'"],
  ['src/reactors/runtime/host/probe.ts', "import { x } from '../../../errors/index.js'"],
  ['src/reactors/runtime/child/probe.ts', "import { x } from '../../../errors/log-safe.js'"],
  ['src/reactors/runtime/child/probe.ts', "import { x } from '../../../shapes/http-parts.js'"],
  ['src/reactors/runtime/child/probe.ts', "import { x } from './isolate-cache.js'"],
  ['src/reactors/runtime/child/probe.ts', "import { Worker } from 'node:worker_threads'"],
  ['src/reactors/runtime/shared/probe.ts', "import type { x } from '../../../errors/log-safe.js'"],
  ['src/http/routes/probe.ts', "import { x } from '../presenters/tokens.js'"],
  ['src/app-probe.ts', "import { x } from './http/context.js'"],
  ['src/vault/probe.ts', "import http from 'node:http'"],
  ['src/egress/probe.ts', "import { x } from '../errors/index.js'"],
  ['src/egress/probe.ts', "import { x } from './headers.js'"],
  ['src/reactors/probe.ts', "import { x } from '../egress/forward.js'"],
]

t.test('a deliberate violation of each import zone fails lint', async (t) => {
  for (const [file, source, message] of refused) {
    const found = await violations(file, source)
    t.equal(found.length, 1, `${file}: ${source}`)
    t.match(found[0], message)
  }
})

t.test('the imports each zone is for still pass', async (t) => {
  for (const [file, source] of allowed) t.same(await violations(file, source), [], `${file}: ${source}`)
})

t.test('the tree as it is keeps every zone', async (t) => {
  const results = await eslint.lintFiles(['src'])
  const found = results.flatMap((r) => r.messages.filter((m) => m.ruleId === 'no-restricted-imports').map((m) => `${path.relative(root, r.filePath)}: ${m.message}`))
  t.same(found, [])
})
