import { existsSync } from 'node:fs'
import t from 'tap'
import { runtimeLaunchSpec } from '../../../src/reactors/runtime/host/launch.js'

t.test('from TypeScript source the child is child.ts, loaded through tsx, without a node snapshot', async (t) => {
  const spec = runtimeLaunchSpec()
  t.match(spec.modulePath, /src\/reactors\/runtime\/child\/child\.ts$/)
  t.ok(existsSync(spec.modulePath))
  t.same(spec.execArgv.slice(0, 2), ['--no-node-snapshot', '--no-lazy-feedback-allocation'])
  t.ok(spec.execArgv.some((arg) => /^--import=file:.*\/tsx\//.test(arg)), 'tsx by absolute URL, independent of the cwd')
})
