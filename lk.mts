import ivm from 'isolated-vm'
import { PRELUDE_SOURCE } from './src/reactors/runtime/child/sandbox-source.js'
const variant = process.argv[2] ?? 'full'
const src = variant === 'nolock' ? PRELUDE_SOURCE.replace('  lockdown();\n', '') : PRELUDE_SOURCE
for (let i = 0; i < 6; i++) {
  const iso = new ivm.Isolate({ memoryLimit: 128 })
  const prelude = iso.compileScriptSync(src)
  const t0 = process.hrtime.bigint()
  const ctx = iso.createContextSync()
  ctx.global.setSync('__tessera_bridge', new ivm.Callback(() => {}, { ignored: true }))
  prelude.runSync(ctx, { reference: true })
  const t2 = process.hrtime.bigint()
  console.log(`${variant}: new isolate: context+prelude ${Number(t2 - t0) / 1000} µs`)
  iso.dispose()
}
