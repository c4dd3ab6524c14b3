import t from 'tap'
import { holds, withinSaver } from '../../../src/auth/policies.js'
import type { Principal } from '../../../src/auth/principal.js'
import { saverRefusal } from '../../../src/auth/saver-refusal.js'

// `tessera migrate` names what the runtime refuses: both must judge a saver alike.

const NOW = Date.parse('2026-11-30T00:00:00Z')
const principal = (over: Partial<Principal>): Principal => ({ kind: 'application', id: 'a', tenantId: 't', type: 'management', permissions: [], rules: [], expiresAt: null, keyHash: 'h', ...over })
const caller = principal({ type: 'private', permissions: ['token:use'] })
const rule = (permissions: string[]) => [{ priority: 1, container: '/pci/', transform: 'reveal' as const, permissions }]

const savers: [string, Principal | undefined, ReturnType<typeof saverRefusal>][] = [
  ['gone', undefined, 'gone'],
  ['a deploy key', principal({ permissions: ['reactor:update', 'proxy:update'] }), 'lacks token:use'],
  ['a ceiling in a rule', principal({ rules: rule(['token:use']) }), undefined],
  ['a ceiling without token:use', principal({ rules: rule(['token:read']) }), 'lacks token:use'],
  ['a plain ceiling', principal({ permissions: ['token:use'] }), undefined],
  ['expired', principal({ permissions: ['token:use'], expiresAt: new Date(NOW) }), 'expired'],
  ['expiring later', principal({ permissions: ['token:use'], expiresAt: new Date(NOW + 1) }), undefined],
]

for (const [what, saver, why] of savers) {
  t.test(what, async (t) => {
    t.equal(saverRefusal(saver, NOW), why)
    t.equal(holds(withinSaver(caller, saver, NOW), 'token:use'), why === undefined, 'as the runtime decides')
  })
}
