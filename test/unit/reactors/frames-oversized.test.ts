import t from 'tap'
import { encodeFrame, FrameReader } from '../../../src/reactors/runtime/shared/frames.js'

// A worker given a frame larger than it takes fails that one call (the body is skipped as it
// streams by) and reads the next frames as usual; without the callback the frame is an error.
const stream = Buffer.concat([encodeFrame({ n: 1 }, 'a'), encodeFrame({ n: 2, big: true }, 'y'.repeat(5000)), encodeFrame({ n: 3 }, 'é'.repeat(10))])

t.test('an oversized frame goes to onOversized with its header, the rest is read, in any split', async (t) => {
  for (const size of [1, 3, 8, 9, 13, 100, 999, 1000, 4096, stream.length]) {
    const got: unknown[] = []
    const reader = new FrameReader(
      (h, b) => got.push(['frame', h, b]),
      1000,
      (h) => got.push(['oversized', h]),
    )
    for (let i = 0; i < stream.length; i += size) reader.push(stream.subarray(i, i + size))
    t.same(got, [['frame', { n: 1 }, 'a'], ['oversized', { n: 2, big: true }], ['frame', { n: 3 }, 'é'.repeat(10)]], `chunks of ${size} bytes`)
  }
})

t.test('a header that alone passes the bound is still a FrameError', async (t) => {
  const reader = new FrameReader(
    () => undefined,
    100,
    () => t.fail('not for a header over the bound'),
  )
  t.throws(() => reader.push(encodeFrame({ pad: 'z'.repeat(200) })), { name: 'FrameError' })
})
