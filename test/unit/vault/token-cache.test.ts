import t from 'tap'
import { createTokenCache, type UsableToken } from '../../../src/vault/token-cache.js'
import { fakeNotify } from '../../helpers/fake-notify.js'

const TENANT = '00000000-0000-4000-8000-000000000001'
const token = (id: string): UsableToken => ({
  record: { tenant_id: TENANT, id, type: 'token', containers: ['/'], mask: null, ciphertext: Buffer.alloc(16), expires_at: null } as unknown as UsableToken['record'],
  dataKey: Buffer.alloc(32, 1),
  aad: Buffer.alloc(8),
})

t.test('tokens replaced together leave every process in one NOTIFY statement', async (t) => {
  const pg = fakeNotify()
  const here = createTokenCache(pg.process().bus)
  const there = createTokenCache(pg.process().bus)
  await Promise.all([here.start(), there.start()])
  const ids = ['a', 'b', 'c']
  for (const id of ids) there.put(token(id), there.generation())
  t.same(ids.map((id) => there.get(TENANT, id)?.record.id), ids)
  await here.invalidate(TENANT, ids)
  t.equal(pg.sent, 1, 'one statement')
  t.same(ids.map((id) => there.get(TENANT, id)), [undefined, undefined, undefined])
})
