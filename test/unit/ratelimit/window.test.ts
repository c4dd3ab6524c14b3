import t from 'tap'
import { applyHit, decide, usageOf, type WindowState } from '../../../src/ratelimit/window.js'
import type { ScopeHit } from '../../../src/ratelimit/types.js'

const rule: ScopeHit = { scope: 'global', limit: 2, windowMs: 1000, blockMs: 5000 }
const fresh = (): WindowState => ({ count: 0, windowEndsAt: 0, blockedUntil: 0 })

t.test('exactly the limit passes; the next is blocked for blockMs', async (t) => {
  const s = fresh()
  t.equal(applyHit(s, rule, 0), 0)
  t.equal(applyHit(s, rule, 10), 0)
  t.equal(applyHit(s, rule, 20), 5000)
  t.equal(applyHit(s, rule, 1020), 4000, 'blocked requests report the time left and do not extend the block')
  t.equal(applyHit(s, rule, 5019), 1)
  t.equal(applyHit(s, rule, 5020), 0, 'a fresh window starts after the block')
  t.equal(applyHit(s, rule, 5021), 0)
  t.equal(applyHit(s, rule, 5022), 5000)
})

t.test('the window opens with its first request and resets when it ends', async (t) => {
  const s = fresh()
  applyHit(s, rule, 100)
  applyHit(s, rule, 1099)
  t.equal(applyHit(s, rule, 1100), 0, 'window [100, 1100) is over')
  t.equal(applyHit(s, rule, 1101), 0)
  t.equal(applyHit(s, rule, 1102), 5000)
})

t.test('decide names the scope blocked longest', async (t) => {
  const scopes: ScopeHit[] = [rule, { ...rule, scope: 'tokens_search' }]
  const open = { blockedMs: 0, count: 0, resetMs: 1000 }
  const blocked = (ms: number) => ({ blockedMs: ms, count: 0, resetMs: ms })
  t.match(decide(scopes, [open, open]), { allowed: true })
  t.same(decide(scopes, [open, blocked(300)]), { allowed: false, scope: 'tokens_search', retryAfterMs: 300, quota: { limit: 2, remaining: 0, resetMs: 300 } })
  t.same(decide(scopes, [blocked(900), blocked(300)]), { allowed: false, scope: 'global', retryAfterMs: 900, quota: { limit: 2, remaining: 0, resetMs: 900 } })
})

t.test('the quota is the scope with the fewest requests left', async (t) => {
  const global: ScopeHit = { scope: 'global', limit: 10, windowMs: 10_000, blockMs: 5000 }
  const search: ScopeHit = { scope: 'tokens_search', limit: 3, windowMs: 1000, blockMs: 5000 }
  t.same(decide([global, search], [{ blockedMs: 0, count: 2, resetMs: 9000 }, { blockedMs: 0, count: 2, resetMs: 400 }]), {
    allowed: true,
    quota: { limit: 3, remaining: 1, resetMs: 400 },
  })
  t.same(decide([global, search], [{ blockedMs: 0, count: 9, resetMs: 9000 }, { blockedMs: 0, count: 2, resetMs: 400 }]).quota, { limit: 10, remaining: 1, resetMs: 9000 })
})

t.test('usageOf reads the window applyHit left', async (t) => {
  const s = fresh()
  t.same(usageOf(s, applyHit(s, rule, 100), 300), { blockedMs: 0, count: 1, resetMs: 800 })
  t.same(usageOf(s, applyHit(s, rule, 400), 400), { blockedMs: 0, count: 2, resetMs: 700 })
  t.same(usageOf(s, applyHit(s, rule, 500), 500), { blockedMs: 5000, count: 0, resetMs: 5000 })
})
