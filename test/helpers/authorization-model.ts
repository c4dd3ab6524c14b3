import fc from 'fast-check'

/**
 * A reference model of the documented read decision (README "Authorization"), written apart
 * from src/auth so the matrix test checks the service against the prose, not against itself.
 */

export type T = 'redact' | 'mask' | 'reveal'
export type Decision = T | undefined
export type Perm = 'token:read' | 'token:search' | 'token:use' | 'token:update' | 'token:create' | 'token:delete'

export interface Cond {
  attribute: 'id' | 'container'
  operator: 'equals' | 'starts_with'
  value: string
}

export interface Rule {
  priority: number
  container?: string
  conditions?: Cond[]
  transform: T
  permissions: Perm[]
}

export interface Grant {
  rules: Rule[]
  permissions: Perm[]
}

export interface Tok {
  id: string
  type: string
  containers: string[]
  data: unknown
  masked: unknown
  /** The one search index value of the token (its last four digits). */
  last4: string
}

const RANK = { redact: 1, mask: 2, reveal: 3 }

export function weaker(a: Decision, b: Decision): Decision {
  if (a === undefined || b === undefined) return undefined
  return RANK[a] <= RANK[b] ? a : b
}

/** First rule by priority that matches the token and lists the permission; plain permissions last, on `/`. */
export function decision(grant: Grant, permission: Perm, token: Tok): Decision {
  for (const rule of [...grant.rules].sort((a, b) => a.priority - b.priority)) {
    if (rule.permissions.includes(permission) && matches(rule, token)) return rule.transform
  }
  if (grant.permissions.includes(permission)) return permission === 'token:use' ? 'reveal' : 'mask'
  return undefined
}

function matches(rule: Rule, token: Tok): boolean {
  if (rule.container !== undefined) return token.containers.some((c) => c.startsWith(rule.container!))
  return (rule.conditions ?? []).every((c) => {
    const test = (v: string) => (c.operator === 'equals' ? v === c.value : v.startsWith(c.value))
    return c.attribute === 'id' ? test(token.id) : token.containers.some(test)
  })
}

/** What an answer about a token shows: the operation's decision, no more than the caller's read (redacted without read). */
export function shown(grant: Grant, permission: Perm, token: Tok, within?: Grant): Decision {
  const op = bounded(grant, permission, token, within)
  if (op === undefined) return undefined
  return weaker(op, bounded(grant, 'token:read', token, within) ?? 'redact')
}

/** A session's decision is also bounded by its authorizer's. */
export function bounded(grant: Grant, permission: Perm, token: Tok, within?: Grant): Decision {
  const own = decision(grant, permission, token)
  return within === undefined ? own : weaker(own, decision(within, permission, token))
}

/** `data` as a transform leaves it: undefined is "absent". */
export function dataUnder(transform: T, token: Tok): unknown {
  if (transform === 'reveal') return token.data
  if (transform === 'mask') return token.masked
  return undefined
}

const card = (number: string) => ({ number, expiration_month: 12, expiration_year: 2030, cvc: '123' })
const maskedCard = (number: string) => ({ number: `XXXXXXXXXXXX${number.slice(-4)}`, expiration_month: 12, expiration_year: 2030 })

/** One token per interesting place; distinct values, so a leak of one token's data into another's answer shows. */
export const TOKENS: Tok[] = [
  { id: 'mx-pci-high', type: 'card', containers: ['/pci/high/'], data: card('4242424242424242'), masked: maskedCard('4242424242424242'), last4: '4242' },
  { id: 'mx-pci-low', type: 'card', containers: ['/pci/low/'], data: card('4000056655665556'), masked: maskedCard('4000056655665556'), last4: '5556' },
  { id: 'mx-general', type: 'card_number', containers: ['/general/'], data: '5555555555554444', masked: 'XXXXXXXXXXXX4444', last4: '4444' },
  { id: 'mx-both', type: 'card', containers: ['/general/', '/pci/high/'], data: card('4111111111111111'), masked: maskedCard('4111111111111111'), last4: '1111' },
  { id: 'nx-pii', type: 'social_security_number', containers: ['/pii/high/'], data: '123-45-6789', masked: 'XXXXXXX6789', last4: '6789' },
]

const CONTAINERS = ['/', '/pci/', '/pci/high/', '/general/', '/pii/']
const transform = fc.constantFrom<T>('redact', 'mask', 'reveal')
const withPriorities = (rules: Omit<Rule, 'priority'>[]): Rule[] => rules.map((r, i) => ({ ...r, priority: (i + 1) * 10 }))

/** Container rule sets for private (and public) Applications, including priority order and plain permissions. */
export function containerGrants(perms: readonly Perm[], count: number, seed: number): Grant[] {
  const rule = fc.record({ container: fc.constantFrom(...CONTAINERS), transform, permissions: fc.subarray([...perms], { minLength: 1 }) })
  const grant = fc.record({ rules: fc.array(rule, { minLength: 1, maxLength: 4 }).map(withPriorities), permissions: fc.subarray([...perms], { maxLength: Math.min(2, perms.length) }) })
  return fc.sample(grant, { seed, numRuns: count })
}

/** Condition rule sets for sessions: container prefixes and exact containers, token ids and id prefixes. */
export function sessionGrants(perms: readonly Perm[], count: number, seed: number): Grant[] {
  const cond = fc.oneof(
    fc.record({ attribute: fc.constant('container' as const), operator: fc.constant('starts_with' as const), value: fc.constantFrom('/pci/', '/general/', '/', '/pi') }),
    fc.record({ attribute: fc.constant('container' as const), operator: fc.constant('equals' as const), value: fc.constantFrom('/pci/high/', '/general/') }),
    fc.record({ attribute: fc.constant('id' as const), operator: fc.constant('equals' as const), value: fc.constantFrom(...TOKENS.map((tok) => tok.id)) }),
    fc.record({ attribute: fc.constant('id' as const), operator: fc.constant('starts_with' as const), value: fc.constantFrom('mx-', 'mx-pci', 'nx') }),
  )
  const rule = fc.record({ conditions: fc.array(cond, { minLength: 1, maxLength: 2 }), transform, permissions: fc.subarray([...perms], { minLength: 1 }) })
  return fc.sample(fc.array(rule, { minLength: 1, maxLength: 3 }).map((rules) => ({ rules: withPriorities(rules), permissions: [] })), { seed, numRuns: count })
}
