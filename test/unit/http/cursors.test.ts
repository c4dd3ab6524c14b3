import t from 'tap'
import { decodeCursor, encodeCursor } from '../../../src/http/cursor.js'
import { encodeLogCursor, parseListLogsQuery } from '../../../src/http/schemas/logs.js'

const b64 = (text: string | Buffer) => Buffer.from(text).toString('base64url')

t.test('decodeCursor takes back what encodeCursor made, at either end of the storable years', async (t) => {
  for (const iso of ['0001-01-01T00:00:00.000Z', '2020-01-01T00:00:00.000Z', '9999-12-31T23:59:59.999Z']) {
    const position = { createdAt: new Date(iso), id: 'tok_\u{1F600}' }
    t.same(decodeCursor(encodeCursor(position)), position, iso)
  }
  t.equal(decodeCursor(undefined), undefined)
})

t.test('decodeCursor refuses ids and dates no store takes, naming the field', async (t) => {
  const cases: [string, string][] = [
    ['NUL in the id', b64('["2020-01-01T00:00:00Z","a\\u0000b"]')],
    ['escaped lone surrogate', b64('["2020-01-01T00:00:00Z","a\\ud800"]')],
    ['lone surrogate as bytes', b64(Buffer.concat([Buffer.from('["2020-01-01T00:00:00Z","a'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('"]')]))],
    ['empty id', b64('["2020-01-01T00:00:00Z",""]')],
    ['year -200000', b64('["-200000-01-01T00:00:00Z","x"]')],
    ['year 0', b64('["0000-01-01T00:00:00Z","x"]')],
    ['year 10000', b64('["+010000-01-01T00:00:00.000Z","x"]')],
    ['not RFC 3339', b64('["2020-01-01","x"]')],
  ]
  for (const [label, cursor] of cases) {
    t.throws(() => decodeCursor(cursor, 'next'), { code: 'validation', errors: { next: ['is not a cursor this service issued'] } }, label)
  }
})

t.test('log cursors: the instant must be storable and the seq a safe integer', async (t) => {
  const after = (cursor: string) => parseListLogsQuery({ cursor }).after
  t.same(after(encodeLogCursor({ occurredAt: new Date('9999-12-31T23:59:59.999Z'), seq: 7 })), { occurredAt: new Date('9999-12-31T23:59:59.999Z'), seq: 7 })
  for (const text of ['999999999999999_1', '253402300800000_1', '1_2x']) {
    t.throws(() => after(b64(text)), { code: 'validation', errors: { cursor: ['is not a cursor this API returned'] } }, text)
  }
})
