import t from 'tap'
import type { Tenant } from '../../../src/store/index.js'
import { createTenantSettingsCache } from '../../../src/tenants/settings-cache.js'
import { fakeNotify } from '../../helpers/fake-notify.js'

function tenant(enabled: boolean): Tenant {
  return { id: 't1', name: 'n', settings: { ephemeral_proxy_enabled: enabled }, created_at: new Date(), modified_at: new Date() }
}

t.test('reads once, then from memory; an invalidation anywhere reloads everywhere', async (t) => {
  const pg = fakeNotify()
  let stored = tenant(true)
  let loads = 0
  const load = async () => (loads++, stored)
  const a = createTenantSettingsCache({ bus: pg.process().bus, load })
  const b = createTenantSettingsCache({ bus: pg.process().bus, load })
  await a.start()
  await b.start()
  t.equal((await a.get('t1')).ephemeral_proxy_enabled, true)
  t.equal((await b.get('t1')).ephemeral_proxy_enabled, true)
  await a.get('t1')
  await b.get('t1')
  t.equal(loads, 2, 'one load per process')
  stored = tenant(false)
  await a.invalidate('t1')
  t.equal((await a.get('t1')).ephemeral_proxy_enabled, false)
  t.equal((await b.get('t1')).ephemeral_proxy_enabled, false, 'the other process dropped its copy too')
})

t.test('a load that raced with an invalidation is not cached', async (t) => {
  let release!: (value: Tenant) => void
  let loads = 0
  const cache = createTenantSettingsCache({
    bus: fakeNotify().process().bus,
    load: () => {
      loads++
      return loads === 1 ? new Promise<Tenant>((r) => (release = r)) : Promise.resolve(tenant(false))
    },
  })
  await cache.start()
  const slow = cache.get('t1')
  await cache.invalidate('t1')
  release(tenant(true))
  t.equal((await slow).ephemeral_proxy_enabled, true, 'the racing reader gets what it read')
  t.equal((await cache.get('t1')).ephemeral_proxy_enabled, false, 'but it was not kept')
})

t.test('an unknown tenant is refused', async (t) => {
  const cache = createTenantSettingsCache({ bus: fakeNotify().process().bus, load: async () => undefined })
  await t.rejects(cache.get('nope'), { code: 'forbidden' })
})
