/**
 * The Reactors bench's floor: bare isolated-vm, no Tessera, no IPC, no HTTP. Runs as its own
 * process (`node --no-node-snapshot`, which isolated-vm needs on Node >= 20 and which the bench
 * driver itself cannot be given), pinned like the process under test. Reads one JSON command per
 * line on stdin and answers one JSON line `{"samplesNs":[...]}`:
 *
 *   {"op":"cold","n":N}          new Isolate (128 MB) + createContext + compileScript + run + one call
 *                                (timed), then dispose (untimed)
 *   {"op":"warm","n":N}          one call of a function already compiled in a live context
 *   {"op":"payload","n":N,"bytes":B}   a warm call with a B-byte JSON input, echoed back as a string
 *
 * The function is echo.js's core: `async (input) => JSON.stringify({ raw: JSON.parse(input).args })`,
 * called with the async API (`apply` with `result: {promise, copy}`), as the runtime does.
 */
import ivm from 'isolated-vm'
import { createInterface } from 'node:readline'

const SOURCE = 'async (input) => JSON.stringify({ raw: JSON.parse(input).args })'
const SMALL = JSON.stringify({ args: { hello: 'world' }, configuration: {} })

type Fn = ivm.Reference<(input: string) => Promise<string>>

async function instantiate(): Promise<{ isolate: ivm.Isolate; fn: Fn }> {
  const isolate = new ivm.Isolate({ memoryLimit: 128 })
  const context = await isolate.createContext()
  const script = await isolate.compileScript(SOURCE)
  const fn = (await script.run(context, { reference: true })) as Fn
  return { isolate, fn }
}

const call = (fn: Fn, input: string) => fn.apply(undefined, [input], { result: { promise: true, copy: true } }) as unknown as Promise<string>

async function cold(n: number): Promise<number[]> {
  const samples: number[] = []
  for (let i = 0; i < n; i++) {
    const t = process.hrtime.bigint()
    const { isolate, fn } = await instantiate()
    await call(fn, SMALL)
    samples.push(Number(process.hrtime.bigint() - t))
    isolate.dispose()
  }
  return samples
}

let warmInstance: { isolate: ivm.Isolate; fn: Fn } | undefined

async function warm(n: number, input: string): Promise<number[]> {
  warmInstance ??= await instantiate()
  const { fn } = warmInstance
  const samples: number[] = []
  for (let i = 0; i < n; i++) {
    const t = process.hrtime.bigint()
    const out = await call(fn, input)
    samples.push(Number(process.hrtime.bigint() - t))
    if (out.length < input.length - 64) throw new Error('the echo lost data')
  }
  return samples
}

function payload(bytes: number): string {
  const envelope = JSON.stringify({ args: { pad: '' }, configuration: {} })
  return JSON.stringify({ args: { pad: 'x'.repeat(bytes - envelope.length) }, configuration: {} })
}

const lines = createInterface({ input: process.stdin })
for await (const line of lines) {
  if (!line.trim()) continue
  const cmd = JSON.parse(line) as { op: 'cold' | 'warm' | 'payload'; n: number; bytes?: number }
  try {
    const samplesNs = cmd.op === 'cold' ? await cold(cmd.n) : cmd.op === 'warm' ? await warm(cmd.n, SMALL) : await warm(cmd.n, payload(cmd.bytes ?? 5 * 1024 * 1024))
    process.stdout.write(JSON.stringify({ samplesNs }) + '\n')
  } catch (err) {
    process.stdout.write(JSON.stringify({ error: (err as Error).message }) + '\n')
  }
}
