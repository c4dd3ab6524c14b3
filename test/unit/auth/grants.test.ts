import fc from 'fast-check'
import t from 'tap'
import { decide, type AccessRule, type RuleCondition, type TokenScope, type Transform } from '../../../src/auth/access-rules.js'
import { grantExcess, satisfiable, type Grants } from '../../../src/auth/grants.js'

const rule = (priority: number, container: string, transform: Transform, permissions: string[]): AccessRule => ({ priority, container, transform, permissions })
const cond = (priority: number, conditions: RuleCondition[], transform: Transform, permissions: string[]): AccessRule => ({ priority, conditions, transform, permissions })
const grants = (rules: AccessRule[], permissions: string[] = []): Grants => ({ rules, permissions })
const within = (grant: Grants, grantor: Grants) => grantExcess(grant, grantor).length === 0

t.test('table: what a grant may and may not hand on', async (t) => {
  const revealAll = grants([rule(1, '/', 'reveal', ['token:read', 'token:use'])])
  const generalMask = grants([rule(1, '/general/', 'mask', ['token:read'])])
  const pciRedactFirst = grants([rule(1, '/pci/', 'redact', ['token:read', 'token:use']), rule(2, '/', 'reveal', ['token:read', 'token:use', 'token:search'])])
  const cases: [string, Grants, Grants, boolean][] = [
    ['the same grants', revealAll, revealAll, true],
    ['a narrower container', grants([rule(1, '/pci/high/', 'reveal', ['token:read'])]), revealAll, true],
    ['a weaker transform', grants([rule(1, '/', 'mask', ['token:read'])]), revealAll, true],
    ['fewer permissions', grants([rule(1, '/', 'reveal', ['token:use'])]), revealAll, true],
    ['a permission the grantor lacks', grants([rule(1, '/', 'redact', ['token:delete'])]), revealAll, false],
    ['a wider container', grants([rule(1, '/', 'mask', ['token:read'])]), generalMask, false],
    ['a stronger transform', grants([rule(1, '/general/', 'reveal', ['token:read'])]), generalMask, false],
    ['issue 12 #2: reveal on starts_with "/" from mask on /general/', grants([cond(1, [{ attribute: 'container', operator: 'starts_with', value: '/' }], 'reveal', ['token:read'])]), generalMask, false],
    ['a condition inside the grantor container, same transform', grants([cond(1, [{ attribute: 'container', operator: 'starts_with', value: '/general/a' }], 'mask', ['token:read'])]), generalMask, true],
    ['an id condition: the token may sit anywhere', grants([cond(1, [{ attribute: 'id', operator: 'equals', value: 'tok_1' }], 'mask', ['token:read'])]), generalMask, false],
    ['id condition and container condition', grants([cond(1, [{ attribute: 'id', operator: 'equals', value: 'tok_1' }, { attribute: 'container', operator: 'starts_with', value: '/general/' }], 'mask', ['token:read'])]), generalMask, true],
    ['the grantor redacts /pci/ first: reveal on / is wider', grants([rule(1, '/', 'reveal', ['token:read'])]), pciRedactFirst, false],
    ['reveal on /general/ is wider too: a token may be in /general/ and /pci/', grants([rule(1, '/general/', 'reveal', ['token:read'])]), pciRedactFirst, false],
    ['repeating the redact rule first makes it fit', grants([rule(1, '/pci/', 'redact', ['token:read']), rule(2, '/general/', 'reveal', ['token:read'])]), pciRedactFirst, true],
    ['as a session condition too', grants([cond(1, [{ attribute: 'container', operator: 'starts_with', value: '/pci/' }], 'redact', ['token:read']), cond(2, [{ attribute: 'id', operator: 'starts_with', value: 'a' }], 'reveal', ['token:read'])]), pciRedactFirst, true],
    ['a grant that redacts /pci/ may keep redact there', grants([rule(1, '/pci/', 'redact', ['token:use'])]), pciRedactFirst, true],
    ['search was not redacted by the grantor', grants([rule(1, '/', 'reveal', ['token:search'])]), pciRedactFirst, true],
    ['plain token:use reveals on every container', grants([], ['token:use']), generalMask, false],
    ['plain token:read is mask on every container', grants([], ['token:read']), grants([rule(1, '/', 'mask', ['token:read'])]), true],
    ['plain grantor permissions', grants([rule(1, '/pci/', 'mask', ['token:read'])]), grants([], ['token:read']), true],
    ['plain grantor token:read does not reach reveal', grants([rule(1, '/pci/', 'reveal', ['token:read'])]), grants([], ['token:read']), false],
    ['a management permission held', grants([], ['application:read']), grants([], ['application:read', 'application:create']), true],
    ['a management permission not held', grants([], ['application:update']), grants([], ['application:read']), false],
    ['a management permission held through a rule', grants([], ['proxy:read']), grants([rule(1, '/', 'redact', ['proxy:read'])]), true],
    ['a grantor earlier rule without the permission does not shadow', grants([rule(1, '/', 'reveal', ['token:read'])]), grants([rule(1, '/pci/', 'redact', ['token:use']), rule(2, '/', 'reveal', ['token:read'])]), true],
    ['equals a container the grantor covers', grants([cond(1, [{ attribute: 'container', operator: 'equals', value: '/general/x/' }], 'mask', ['token:read'])]), generalMask, true],
    ['equals a container it does not', grants([cond(1, [{ attribute: 'container', operator: 'equals', value: '/pci/' }], 'mask', ['token:read'])]), generalMask, false],
    ['a condition no valid container can meet reaches nothing', grants([cond(1, [{ attribute: 'container', operator: 'starts_with', value: 'pci' }], 'reveal', ['token:read'])]), generalMask, true],
  ]
  for (const [name, grant, grantor, expected] of cases) t.equal(within(grant, grantor), expected, name)
})

t.test('the excess names the grant field, the permission and the grantor rule', async (t) => {
  const excess = grantExcess(
    grants([rule(1, '/general/', 'mask', ['token:read']), rule(2, '/', 'reveal', ['token:read'])], ['application:create']),
    grants([rule(3, '/', 'mask', ['token:read'])]),
  )
  t.same(
    excess.map((e) => [e.field, e.permission]),
    [
      ['permissions[0]', 'application:create'],
      ['rules[1]', 'token:read'],
    ],
  )
  t.match(excess[1]!.detail, /reveal.*priority 3 on \/ gives only mask/)
})

t.test('satisfiable: witnesses for containers and ids', async (t) => {
  const c = (op: 'equals' | 'starts_with', value: string) => ({ on: 'container' as const, op, value })
  const id = (op: 'equals' | 'starts_with', value: string) => ({ on: 'id' as const, op, value })
  t.ok(satisfiable([c('starts_with', '/a/')], []))
  t.notOk(satisfiable([c('starts_with', '/a/b/')], [[c('starts_with', '/a/')]]), 'inside an excluded prefix')
  t.ok(satisfiable([c('starts_with', '/a/')], [[c('starts_with', '/a/b/')]]), 'beside an excluded sub-prefix')
  t.notOk(satisfiable([], [[]]), 'a rule that matches everything cannot be avoided')
  t.notOk(satisfiable([], [[c('starts_with', '/')]]), 'every token has a container')
  t.ok(satisfiable([c('starts_with', '/a/'), c('starts_with', '/b/')], []), 'two containers on one token')
  t.notOk(satisfiable([c('equals', '/a/')], [[c('equals', '/a/')]]))
  t.notOk(satisfiable([c('equals', 'no-slash')], []), 'not a valid container')
  t.notOk(satisfiable([id('equals', 'x1'), id('starts_with', 'y')], []))
  t.ok(satisfiable([id('starts_with', 'x'), id('starts_with', 'x1')], [[id('equals', 'x1')]]))
  t.notOk(satisfiable([id('starts_with', 'x1')], [[id('starts_with', 'x')]]))
  t.ok(satisfiable([id('equals', 'x1')], [[id('equals', 'x2'), c('starts_with', '/')]]), 'one failing atom is enough')
})

// --- property tests against a brute-force model over a universe of tokens -----------------

const CONTAINERS = ['/', '/a/', '/a/b/', '/a/c/', '/b/', '/ab/']
const IDS = ['x1', 'x2', 'y1']
const PERMISSIONS = ['token:read', 'token:use']
const TRANSFORMS: Transform[] = ['redact', 'mask', 'reveal']
const RANK = { none: 0, redact: 1, mask: 2, reveal: 3 }

/** Every token with one or two containers of the universe: rich enough to hold every witness of container-only rules. */
const TOKENS: TokenScope[] = IDS.flatMap((id) =>
  CONTAINERS.flatMap((a, i) => [{ id, containers: [a] }, ...CONTAINERS.slice(i + 1).map((b) => ({ id, containers: [a, b] }))]),
)

function rank(g: Grants, permission: string, token: TokenScope): number {
  const d = decide(g.rules, g.permissions, permission, token)
  return d.allowed ? RANK[d.transform] : RANK.none
}

function violation(grant: Grants, grantor: Grants): boolean {
  return PERMISSIONS.some((p) => TOKENS.some((token) => rank(grant, p, token) > rank(grantor, p, token)))
}

const containerRule = fc.record({
  container: fc.constantFrom(...CONTAINERS),
  transform: fc.constantFrom(...TRANSFORMS),
  permissions: fc.subarray(PERMISSIONS, { minLength: 1 }),
})
const condition = fc.oneof(
  fc.record({ attribute: fc.constant('container' as const), operator: fc.constantFrom('equals' as const, 'starts_with' as const), value: fc.constantFrom(...CONTAINERS, '/a') }),
  fc.record({ attribute: fc.constant('id' as const), operator: fc.constantFrom('equals' as const, 'starts_with' as const), value: fc.constantFrom(...IDS, 'x') }),
)
const conditionRule = fc.record({ conditions: fc.array(condition, { minLength: 1, maxLength: 2 }), transform: fc.constantFrom(...TRANSFORMS), permissions: fc.subarray(PERMISSIONS, { minLength: 1 }) })

const withPriorities = <T extends object>(rules: T[]) => rules.map((r, i) => ({ ...r, priority: i + 1 }) as unknown as AccessRule)
const containerGrants = fc.record({ rules: fc.array(containerRule, { maxLength: 4 }).map(withPriorities), permissions: fc.subarray(PERMISSIONS) })
const sessionGrants = fc.record({ rules: fc.array(conditionRule, { maxLength: 3 }).map(withPriorities), permissions: fc.subarray(PERMISSIONS) })

t.test('container rules: the relation is exact (wider exactly when some token shows more)', async (t) => {
  fc.assert(
    fc.property(containerGrants, containerGrants, (grant, grantor) => within(grant, grantor) === !violation(grant, grantor)),
    { numRuns: 3000 },
  )
  t.pass('3000 random pairs agree with the brute-force model')
})

t.test('session conditions: never within when some token shows more (sound, on the safe side)', async (t) => {
  fc.assert(
    fc.property(sessionGrants, containerGrants, (grant, grantor) => !within(grant, grantor) || !violation(grant, grantor)),
    { numRuns: 3000 },
  )
  t.pass('3000 random pairs: no grant judged within shows more on any token of the universe')
})

t.test('every grant is within itself; within is transitive', async (t) => {
  fc.assert(fc.property(containerGrants, (g) => within(g, g)))
  fc.assert(fc.property(sessionGrants, (g) => within(g, g)))
  fc.assert(fc.property(containerGrants, containerGrants, containerGrants, (a, b, c) => !(within(a, b) && within(b, c)) || within(a, c)), { numRuns: 2000 })
  t.pass('reflexive and transitive')
})

t.test('a hostile grant costs a bounded search and is refused', async (t) => {
  const many = Array.from({ length: 100 }, (_, i) =>
    cond(i + 1, Array.from({ length: 50 }, (_, j) => ({ attribute: 'container' as const, operator: 'starts_with' as const, value: `/c${i}x${j}/` })), 'redact', ['token:read']),
  )
  const grant = grants([...many.slice(0, 99), cond(100, [{ attribute: 'id', operator: 'starts_with', value: 'x' }], 'reveal', ['token:read'])])
  const grantor = grants([rule(1, '/', 'mask', ['token:read'])])
  t.notOk(within(grant, grantor), 'reveal over mask is wider whatever the search finds')
})

t.test('a large grant within its grantor is judged within: the check is linear in the conditions, not a search over their combinations', async (t) => {
  // The review's probe: 100 rules of 50 conditions of 390 characters took 17 s in one request
  // (the event loop stalled for every tenant) and was then refused, its budget spent.
  const large = (rules: number, conditions: number, base: string, transform: Transform) =>
    grants(
      Array.from({ length: rules }, (_, i) =>
        cond(i + 1, Array.from({ length: conditions }, (_, j) => ({ attribute: 'container' as const, operator: 'starts_with' as const, value: `${base}/r${i}x${j}`.padEnd(390, 'a') })), transform, ['token:read']),
      ),
    )
  t.ok(within(large(100, 50, '/orders', 'mask'), grants([rule(1, '/orders/', 'mask', ['token:read'])])), '100 rules of 50 conditions inside the grantor container')
  t.ok(within(large(10, 10, '', 'reveal'), grants([rule(1, '/', 'reveal', ['token:read'])])), '10 rules of 10 conditions under reveal on / (was refused: the search ran out)')
  t.notOk(within(large(100, 50, '/orders', 'reveal'), grants([rule(1, '/orders/', 'mask', ['token:read'])])), 'and the same rules with reveal over mask are wider')
})

t.test('satisfiable: a spent budget answers "satisfiable", which refuses the grant', async (t) => {
  const c = (value: string) => ({ on: 'container' as const, op: 'starts_with' as const, value })
  const budget = { work: 0 }
  t.ok(satisfiable([c('/a/b/')], [[c('/a/')]], budget), 'on the safe side')
  t.ok(budget.work < 0)
})
