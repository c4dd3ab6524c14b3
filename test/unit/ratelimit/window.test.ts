import t from 'tap'
import { applyHit, decide, type WindowState } from '../../../src/ratelimit/window.js'
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
  t.same(decide(scopes, [0, 0]), { allowed: true })
  t.same(decide(scopes, [0, 300]), { allowed: false, scope: 'tokens_search', retryAfterMs: 300 })
  t.same(decide(scopes, [900, 300]), { allowed: false, scope: 'global', retryAfterMs: 900 })
})
