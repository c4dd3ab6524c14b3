import t from 'tap'
import { decide, holdsPermission, implicitTransform, isValidContainer, validatePermissions, validateRules, type AccessRule } from '../../../src/auth/access-rules.js'

const pciHigh = { id: 'tok_card', containers: ['/pci/high/'] }
const pciLow = { id: 'tok_low', containers: ['/pci/low/'] }
const general = { id: 'tok_gen', containers: ['/general/high/'] }

const rule = (priority: number, container: string | undefined, transform: AccessRule['transform'], permissions: string[]): AccessRule =>
  container === undefined ? { priority, transform, permissions } : { priority, container, transform, permissions }

t.test('the first rule by priority that matches and lists the permission decides', async (t) => {
  const rules = [rule(2, '/pci/', 'mask', ['token:read']), rule(1, '/pci/high/', 'reveal', ['token:read'])]
  t.same(decide(rules, [], 'token:read', pciHigh), { allowed: true, transform: 'reveal' }, 'priority, not array order')
  t.same(decide(rules, [], 'token:read', pciLow), { allowed: true, transform: 'mask' }, 'the broader rule covers the rest')
  t.same(decide(rules, [], 'token:read', general), { allowed: false })
})

t.test('a matching rule without the permission is passed over, not a denial', async (t) => {
  const rules = [rule(1, '/pci/high/', 'reveal', ['token:use']), rule(5, '/pci/', 'redact', ['token:read'])]
  t.same(decide(rules, [], 'token:read', pciHigh), { allowed: true, transform: 'redact' })
  t.same(decide(rules, [], 'token:use', pciHigh), { allowed: true, transform: 'reveal' })
  t.same(decide(rules, [], 'token:use', pciLow), { allowed: false })
  t.same(decide(rules, [], 'token:delete', pciHigh), { allowed: false })
})

t.test('container scope is a prefix of any of the token’s containers', async (t) => {
  const rules = [rule(1, '/pci/', 'reveal', ['token:read'])]
  t.ok(decide(rules, [], 'token:read', { id: 'x', containers: ['/general/', '/pci/high/'] }).allowed)
  t.notOk(decide(rules, [], 'token:read', { id: 'x', containers: ['/pcix/high/'] }).allowed, 'segment boundaries hold')
  t.notOk(decide(rules, [], 'token:read', { id: 'x', containers: [] }).allowed)
  t.ok(decide([rule(1, '/', 'mask', ['token:read'])], [], 'token:read', general).allowed, '/ covers everything')
})

t.test('a rule with neither container nor conditions matches every token', async (t) => {
  t.same(decide([rule(1, undefined, 'redact', ['token:read'])], [], 'token:read', general), { allowed: true, transform: 'redact' })
})

t.test('plain permissions are the lowest-precedence rule on /', async (t) => {
  t.same(decide([], ['token:read'], 'token:read', general), { allowed: true, transform: 'mask' })
  t.same(decide([], ['token:use'], 'token:use', general), { allowed: true, transform: 'reveal' })
  for (const p of ['token:create', 'token:update', 'token:read', 'token:search']) t.equal(implicitTransform(p), 'mask', p)
  t.equal(implicitTransform('token:use'), 'reveal')
  const rules = [rule(1, '/pci/', 'redact', ['token:read'])]
  t.same(decide(rules, ['token:read'], 'token:read', pciHigh), { allowed: true, transform: 'redact' }, 'rules come first')
  t.same(decide(rules, ['token:read'], 'token:read', general), { allowed: true, transform: 'mask' }, 'plain covers the rest')
  t.same(decide([], ['token:read'], 'token:use', general), { allowed: false })
})

t.test('session conditions', async (t) => {
  const byId: AccessRule = { priority: 1, conditions: [{ attribute: 'id', operator: 'equals', value: 'tok_card' }], transform: 'reveal', permissions: ['token:read'] }
  t.ok(decide([byId], [], 'token:read', pciHigh).allowed)
  t.notOk(decide([byId], [], 'token:read', pciLow).allowed)
  const byPrefix: AccessRule = { priority: 1, conditions: [{ attribute: 'id', operator: 'starts_with', value: 'tok_' }], transform: 'mask', permissions: ['token:read'] }
  t.ok(decide([byPrefix], [], 'token:read', general).allowed)
  t.notOk(decide([byPrefix], [], 'token:read', { id: 'other', containers: ['/'] }).allowed)
  const byContainer: AccessRule = { priority: 1, conditions: [{ attribute: 'container', operator: 'equals', value: '/pci/high/' }], transform: 'mask', permissions: ['token:read'] }
  t.ok(decide([byContainer], [], 'token:read', { id: 'x', containers: ['/a/', '/pci/high/'] }).allowed)
  t.notOk(decide([byContainer], [], 'token:read', { id: 'x', containers: ['/pci/high/more/'] }).allowed, 'equals is exact')
  const both: AccessRule = {
    priority: 1,
    conditions: [
      { attribute: 'container', operator: 'starts_with', value: '/pci/' },
      { attribute: 'id', operator: 'equals', value: 'tok_card' },
    ],
    transform: 'reveal',
    permissions: ['token:read'],
  }
  t.ok(decide([both], [], 'token:read', pciHigh).allowed, 'every condition holds')
  t.notOk(decide([both], [], 'token:read', { id: 'tok_card', containers: ['/general/'] }).allowed, 'one fails')
  t.notOk(decide([both], [], 'token:read', { id: 'tok_low', containers: ['/pci/low/'] }).allowed, 'the other fails')
})

t.test('decide does not reorder the caller’s rules', async (t) => {
  const rules = [rule(3, '/', 'mask', ['token:read']), rule(1, '/pci/', 'reveal', ['token:read'])]
  decide(rules, [], 'token:read', pciHigh)
  t.same(rules.map((r) => r.priority), [3, 1])
})

t.test('holdsPermission', async (t) => {
  t.ok(holdsPermission([], ['token:use'], 'token:use'))
  t.ok(holdsPermission([rule(1, '/pci/', 'reveal', ['token:use'])], [], 'token:use'))
  t.notOk(holdsPermission([rule(1, '/pci/', 'reveal', ['token:read'])], ['token:create'], 'token:use'))
})

t.test('isValidContainer', async (t) => {
  for (const c of ['/', '/pci/', '/pci/high/', '/a_b-c/0/']) t.ok(isValidContainer(c), c)
  for (const c of ['', 'pci/', '/pci', '//', '/pci//high/', '/PCI/', '/p ci/', '/pci/high', '/é/', 1, null]) t.notOk(isValidContainer(c), String(c))
  t.notOk(isValidContainer('/' + 'a/'.repeat(50_000) + '!'), 'a long hostile value is refused')
})

const valid = (extra: Partial<AccessRule> = {}): AccessRule => ({ priority: 1, container: '/pci/', transform: 'mask', permissions: ['token:read'], ...extra })

t.test('validateRules: valid rules for each holder type', async (t) => {
  t.same(validateRules([valid(), valid({ priority: 2, description: 'x', transform: 'reveal', permissions: ['token:use', 'token:read'] })], 'private'), {})
  t.same(validateRules([valid({ permissions: ['token:create', 'token:update'] })], 'public'), {})
  t.same(validateRules([{ priority: 1, transform: 'reveal', permissions: ['application:read'] }], 'management'), {})
  t.same(validateRules([{ priority: 1, conditions: [{ attribute: 'id', operator: 'equals', value: 'tok_1' }], transform: 'reveal', permissions: ['token:read'] }], 'session'), {})
  t.same(validateRules([], 'private'), {})
})

t.test('validateRules: priority', async (t) => {
  t.same(validateRules([valid({ priority: 0 }), valid({ priority: 1.5 }), valid({ priority: '2' as never })], 'private'), {
    'rules[0].priority': ['must be an integer >= 1'],
    'rules[1].priority': ['must be an integer >= 1'],
    'rules[2].priority': ['must be an integer >= 1'],
  })
  t.same(validateRules([valid({ priority: 3 }), valid({ priority: 4 }), valid({ priority: 3 })], 'private'), {
    'rules[2].priority': ['must be unique: rules[0] has priority 3 too'],
  })
  const missing = { container: '/pci/', transform: 'mask', permissions: ['token:read'] }
  t.same(validateRules([missing], 'private'), { 'rules[0].priority': ['must be an integer >= 1'] })
})

t.test('validateRules: transform and permissions', async (t) => {
  t.same(validateRules([valid({ transform: 'hide' as never })], 'private'), { 'rules[0].transform': ['must be one of redact, mask, reveal'] })
  t.same(validateRules([valid({ permissions: [] })], 'private'), { 'rules[0].permissions': ['must be a non-empty array of permissions'] })
  t.same(validateRules([valid({ permissions: 'token:read' as never })], 'private'), { 'rules[0].permissions': ['must be a non-empty array of permissions'] })
  t.same(validateRules([valid({ permissions: ['token:read', 'token:fly', 5 as never] })], 'private'), {
    'rules[0].permissions[1]': ['must be a known permission'],
    'rules[0].permissions[2]': ['must be a known permission'],
  })
  t.same(validateRules([valid({ permissions: ['token:read', 'application:create'] })], 'public'), {
    'rules[0].permissions[0]': ['may not be held by a public Application'],
    'rules[0].permissions[1]': ['may not be held by a public Application'],
  })
  // Issue 12: a management Application holds token permissions as the ceiling of what it may grant.
  t.same(validateRules([valid({ permissions: ['token:read'] })], 'management'), {}, 'a grant ceiling')
  t.same(validateRules([valid({ permissions: ['token:read'] })], 'public'), { 'rules[0].permissions[0]': ['may not be held by a public Application'] })
  const session = { priority: 1, conditions: [{ attribute: 'id' as const, operator: 'equals' as const, value: 'x' }], transform: 'mask' as const }
  t.same(validateRules([{ ...session, permissions: ['application:read'] }], 'session'), { 'rules[0].permissions[0]': ['may not be held by a session'] })
})

t.test('validateRules: container', async (t) => {
  const message = ['must start and end with / and have lower-case [a-z0-9_-] segments']
  for (const container of ['pci', '/pci', '/PCI/', '/pci//', '']) {
    t.same(validateRules([valid({ container })], 'private'), { 'rules[0].container': message }, container)
  }
  const { container: _omit, ...unscoped } = valid()
  t.same(validateRules([unscoped], 'private'), { 'rules[0].container': ['is required for private Applications'] })
  t.same(validateRules([{ ...unscoped, permissions: ['token:create'] }], 'public'), { 'rules[0].container': ['is required for public Applications'] })
  t.same(validateRules([valid({ permissions: ['reactor:read'] })], 'management'), {}, 'allowed but not required for management')
})

t.test('validateRules: conditions', async (t) => {
  const conditions = [{ attribute: 'id' as const, operator: 'equals' as const, value: 'tok_1' }]
  t.same(validateRules([valid({ conditions })], 'private'), { 'rules[0].container': ['must not be given together with conditions'] })
  t.same(validateRules([valid({ conditions })], 'session'), { 'rules[0].container': ['must not be given together with conditions'] })
  const { container: _omit, ...unscoped } = valid()
  t.same(validateRules([{ ...unscoped, conditions }], 'private'), {
    'rules[0].conditions': ['is allowed only on sessions'],
    'rules[0].container': ['is required for private Applications'],
  })
  t.same(validateRules([{ ...unscoped, conditions, permissions: ['log:read'] }], 'management'), { 'rules[0].conditions': ['is allowed only on sessions'] })
  t.same(validateRules([unscoped], 'session'), { 'rules[0].conditions': ['is required for sessions'] })
  t.same(validateRules([valid()], 'session'), { 'rules[0].container': ['is not allowed on sessions; use conditions'] })
  t.same(validateRules([{ ...unscoped, conditions: [] }], 'session'), { 'rules[0].conditions': ['must be a non-empty array'] })
  const bad = [
    { attribute: 'type', operator: 'contains', value: '' },
    'x',
    { attribute: 'container', operator: 'starts_with', value: 5, extra: true },
  ]
  t.same(validateRules([{ ...unscoped, conditions: bad as never }], 'session'), {
    'rules[0].conditions[0].attribute': ['must be one of id, container'],
    'rules[0].conditions[0].operator': ['must be one of starts_with, equals'],
    'rules[0].conditions[0].value': ['must be a non-empty string'],
    'rules[0].conditions[1]': ['must be an object'],
    'rules[0].conditions[2].extra': ['is not allowed'],
    'rules[0].conditions[2].value': ['must be a non-empty string'],
  })
})

t.test('validateRules: shapes', async (t) => {
  t.same(validateRules('x', 'private'), { rules: ['must be an array'] })
  t.same(validateRules([null, 1], 'private'), { 'rules[0]': ['must be an object'], 'rules[1]': ['must be an object'] })
  t.same(validateRules([{ ...valid(), scope: 'x', description: 1 }], 'private'), {
    'rules[0].scope': ['is not allowed'],
    'rules[0].description': ['must be a string'],
  })
})

t.test('validatePermissions', async (t) => {
  t.same(validatePermissions(['token:read', 'token:use'], 'private'), {})
  t.same(validatePermissions(['token:read', 'nope'], 'public'), {
    'permissions[0]': ['may not be held by a public Application'],
    'permissions[1]': ['must be a known permission'],
  })
  t.same(validatePermissions('x', 'private'), { permissions: ['must be an array'] })
  t.same(validatePermissions(['tenant:read'], 'session', 'grant'), { 'grant[0]': ['may not be held by a session'] })
})
