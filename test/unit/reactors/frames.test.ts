import t from 'tap'
import { encodeFrame, FrameReader, writeCoalesced } from '../../../src/reactors/runtime/shared/frames.js'

const frames: Array<[object, string]> = [
  [{ t: 'invoke', id: 1 }, '{"args":{"hello":"wörld"}}'],
  [{ t: 'drop', slots: [1, 2] }, ''],
  [{ t: 'done', id: 2, note: '€ and 😀' }, 'x'.repeat(70_000)],
]

t.test('frames come back whole from any split of the stream', async (t) => {
  const stream = Buffer.concat(frames.map(([h, b]) => encodeFrame(h, b)))
  const sizes = [1, 3, 7, 8, 9, 100, 4096, 65_536, stream.length]
  for (const size of sizes) {
    const got: Array<[unknown, string]> = []
    const reader = new FrameReader((h, b) => got.push([h, b]), 1 << 20)
    for (let i = 0; i < stream.length; i += size) reader.push(stream.subarray(i, i + size))
    t.same(got, frames, `chunks of ${size} bytes`)
  }
})

t.test('every split point of a frame pair, including inside the length prefix', async (t) => {
  const stream = Buffer.concat([encodeFrame({ a: 1 }, 'é'), encodeFrame({ b: 2 })])
  for (let cut = 0; cut <= stream.length; cut++) {
    const got: unknown[] = []
    const reader = new FrameReader((h, b) => got.push([h, b]), 1024)
    reader.push(stream.subarray(0, cut))
    reader.push(stream.subarray(cut))
    t.same(got, [[{ a: 1 }, 'é'], [{ b: 2 }, '']], `cut at ${cut}`)
  }
})

t.test('a frame announcing more than the bound is refused, split or not', async (t) => {
  const big = encodeFrame({ t: 'x' }, 'y'.repeat(2000))
  t.throws(() => new FrameReader(() => undefined, 1000).push(big), { name: 'FrameError' })
  const reader = new FrameReader(() => undefined, 1000)
  reader.push(big.subarray(0, 4))
  t.throws(() => reader.push(big.subarray(4, 20)), { name: 'FrameError' })
})

t.test('frames written in one turn of the event loop go out in one write, after its I/O callbacks', async (t) => {
  const log: string[] = []
  const stream = { cork: () => void log.push('cork'), uncork: () => void log.push('uncork'), write: (b: Buffer) => (log.push(`write ${b.length}`), true) }
  const a = encodeFrame({ a: 1 })
  const b = encodeFrame({ b: 22 })
  writeCoalesced(stream, a)
  // A later callback of the same turn (here a tick, like a second socket's data event) joins the same write.
  process.nextTick(() => writeCoalesced(stream, b))
  await new Promise((resolve) => setImmediate(resolve))
  t.same(log, ['cork', `write ${a.length}`, `write ${b.length}`, 'uncork'])
  writeCoalesced(stream, a)
  await new Promise((resolve) => setImmediate(resolve))
  t.same(log.slice(4), ['cork', `write ${a.length}`, 'uncork'], 'the next turn corks again')
})
