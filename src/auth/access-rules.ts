import { FieldErrorList, type FieldErrors } from '../errors/index.js'
import { isRecord } from '../shapes/http-parts.js'
import { isKnownPermission, mayHold } from './permissions.js'

export type Transform = 'redact' | 'mask' | 'reveal'
export const TRANSFORMS: readonly Transform[] = ['redact', 'mask', 'reveal']

export interface RuleCondition {
  attribute: 'id' | 'container'
  operator: 'starts_with' | 'equals'
  value: string
}

export interface AccessRule {
  description?: string
  priority: number
  container?: string
  conditions?: RuleCondition[]
  transform: Transform
  permissions: string[]
}

/** What a rule can see of a token: never its data. */
export interface TokenScope {
  id: string
  containers: readonly string[]
}

export type Decision = { allowed: true; transform: Transform } | { allowed: false }

/** Sessions hold rules too; what they may be granted is what a private Application may hold. */
export type RuleHolderType = 'private' | 'public' | 'management' | 'session'

/**
 * The one access decision, used by every token route, the proxy and Reactors. Rules run in
 * ascending priority and the first one that both matches the token and lists the permission
 * decides; a matching rule that does not list it is passed over, not a denial. Plain
 * `permissions` act as one more rule on container `/` after every explicit rule.
 */
export function decide(rules: readonly AccessRule[], plainPermissions: readonly string[], permission: string, token: TokenScope): Decision {
  const ordered = rules.length > 1 ? [...rules].sort((a, b) => a.priority - b.priority) : rules
  for (const rule of ordered) {
    if (rule.permissions.includes(permission) && ruleMatches(rule, token)) return { allowed: true, transform: rule.transform }
  }
  if (plainPermissions.includes(permission)) return { allowed: true, transform: implicitTransform(permission) }
  return { allowed: false }
}

/** Plain permissions reveal only for `token:use`: the proxy and Reactors must send real data, reads need not. */
export function implicitTransform(permission: string): Transform {
  return permission === 'token:use' ? 'reveal' : 'mask'
}

/** Whether the holder has `permission` on any token at all (e.g. the proxy's `token:use` precondition). */
export function holdsPermission(rules: readonly AccessRule[], plainPermissions: readonly string[], permission: string): boolean {
  return plainPermissions.includes(permission) || rules.some((rule) => rule.permissions.includes(permission))
}

function ruleMatches(rule: AccessRule, token: TokenScope): boolean {
  if (rule.container !== undefined) {
    const scope = rule.container
    return token.containers.some((c) => startsWith(c, scope))
  }
  if (rule.conditions !== undefined) return rule.conditions.every((condition) => conditionHolds(condition, token))
  return true
}

function conditionHolds(condition: RuleCondition, token: TokenScope): boolean {
  const test = condition.operator === 'equals' ? (v: string) => v === condition.value : (v: string) => startsWith(v, condition.value)
  return condition.attribute === 'id' ? test(token.id) : token.containers.some(test)
}

/**
 * `text.startsWith(prefix)` at the cost of one comparison: V8's `startsWith` compares character
 * by character, about 1 µs for two 390-character values that differ at the end, and a session of
 * 100 rules of 50 conditions makes thousands of such tests for each token it reads.
 */
export function startsWith(text: string, prefix: string): boolean {
  return text.length >= prefix.length && text.slice(0, prefix.length) === prefix
}

// Segments cannot contain '/', so the pattern has exactly one way to match: no backtracking.
const CONTAINER = /^\/(?:[a-z0-9_-]+\/)*$/

/** `/`, `/pci/`, `/pci/high/`: starts and ends with `/`, lower-case `[a-z0-9_-]` segments. */
export function isValidContainer(container: unknown): container is string {
  return typeof container === 'string' && CONTAINER.test(container)
}

const RULE_KEYS = new Set(['description', 'priority', 'container', 'conditions', 'transform', 'permissions'])
const CONDITION_KEYS = new Set(['attribute', 'operator', 'value'])

/**
 * Every problem with `rules` for a holder of `type`, as field errors keyed like
 * `rules[0].priority`; empty when the rules are valid. Checks what a JSON schema cannot:
 * uniqueness, the permission table, and which scope each holder type needs.
 */
export function validateRules(rules: unknown, type: RuleHolderType): FieldErrors {
  const errors = new FieldErrorList()
  if (!Array.isArray(rules)) {
    errors.add('rules', 'must be an array')
    return errors.fields
  }
  const seen = new Map<number, number>()
  rules.forEach((rule: unknown, i) => {
    const at = `rules[${i}]`
    if (!isRecord(rule)) return errors.add(at, 'must be an object')
    for (const key of Object.keys(rule)) if (!RULE_KEYS.has(key)) errors.add(`${at}.${key}`, 'is not allowed')
    if (rule.description !== undefined && typeof rule.description !== 'string') errors.add(`${at}.description`, 'must be a string')
    checkPriority(rule.priority, at, seen, i, errors)
    if (!TRANSFORMS.includes(rule.transform as Transform)) errors.add(`${at}.transform`, `must be one of ${TRANSFORMS.join(', ')}`)
    checkPermissions(rule.permissions, `${at}.permissions`, type, errors)
    checkScope(rule, at, type, errors)
  })
  return errors.fields
}

/** Plain `permissions`, keyed like `permissions[0]`. */
export function validatePermissions(permissions: unknown, type: RuleHolderType, field = 'permissions'): FieldErrors {
  const errors = new FieldErrorList()
  if (!Array.isArray(permissions)) errors.add(field, 'must be an array')
  else permissions.forEach((p: unknown, i) => checkPermission(p, `${field}[${i}]`, type, errors))
  return errors.fields
}

function checkPriority(priority: unknown, at: string, seen: Map<number, number>, i: number, errors: FieldErrorList): void {
  if (typeof priority !== 'number' || !Number.isSafeInteger(priority) || priority < 1) {
    errors.add(`${at}.priority`, 'must be an integer >= 1')
    return
  }
  const first = seen.get(priority)
  if (first === undefined) seen.set(priority, i)
  else errors.add(`${at}.priority`, `must be unique: rules[${first}] has priority ${priority} too`)
}

function checkPermissions(permissions: unknown, field: string, type: RuleHolderType, errors: FieldErrorList): void {
  if (!Array.isArray(permissions) || permissions.length === 0) {
    errors.add(field, 'must be a non-empty array of permissions')
    return
  }
  permissions.forEach((p: unknown, i) => checkPermission(p, `${field}[${i}]`, type, errors))
}

function checkPermission(permission: unknown, field: string, type: RuleHolderType, errors: FieldErrorList): void {
  if (typeof permission !== 'string' || !isKnownPermission(permission)) {
    errors.add(field, 'must be a known permission')
    return
  }
  // A session is authorized by a private Application and can hold no more than one could.
  const holder = type === 'session' ? 'private' : type
  if (!mayHold(holder, permission)) errors.add(field, `may not be held by a ${type === 'session' ? 'session' : `${type} Application`}`)
}

function checkScope(rule: Record<string, unknown>, at: string, type: RuleHolderType, errors: FieldErrorList): void {
  const { container, conditions } = rule
  if (container !== undefined && conditions !== undefined) {
    errors.add(`${at}.container`, 'must not be given together with conditions')
    return
  }
  if (container !== undefined && !isValidContainer(container)) {
    errors.add(`${at}.container`, 'must start and end with / and have lower-case [a-z0-9_-] segments')
  }
  if (type === 'session') {
    if (container !== undefined) errors.add(`${at}.container`, 'is not allowed on sessions; use conditions')
    else if (conditions === undefined) errors.add(`${at}.conditions`, 'is required for sessions')
    else checkConditions(conditions, `${at}.conditions`, errors)
    return
  }
  if (conditions !== undefined) errors.add(`${at}.conditions`, 'is allowed only on sessions')
  if (container === undefined && type !== 'management') errors.add(`${at}.container`, `is required for ${type} Applications`)
}

function checkConditions(conditions: unknown, field: string, errors: FieldErrorList): void {
  if (!Array.isArray(conditions) || conditions.length === 0) {
    errors.add(field, 'must be a non-empty array')
    return
  }
  conditions.forEach((condition: unknown, i) => {
    const at = `${field}[${i}]`
    if (!isRecord(condition)) return errors.add(at, 'must be an object')
    for (const key of Object.keys(condition)) if (!CONDITION_KEYS.has(key)) errors.add(`${at}.${key}`, 'is not allowed')
    if (condition.attribute !== 'id' && condition.attribute !== 'container') errors.add(`${at}.attribute`, 'must be one of id, container')
    if (condition.operator !== 'starts_with' && condition.operator !== 'equals') {
      errors.add(`${at}.operator`, 'must be one of starts_with, equals')
    }
    if (typeof condition.value !== 'string' || condition.value === '') errors.add(`${at}.value`, 'must be a non-empty string')
  })
}
