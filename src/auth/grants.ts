import { holdsPermission, implicitTransform, isValidContainer, type AccessRule, type RuleCondition, type Transform } from './access-rules.js'
import { isTokenPermission } from './permissions.js'

/** What an Application or a session holds: plain permissions and access rules. */
export interface Grants {
  permissions: readonly string[]
  rules: readonly AccessRule[]
}

/** One way a grant reaches further than its grantor, named by the grant's field. */
export interface Excess {
  /** `rules[2]` or `permissions[0]`: the part of the grant that is too wide. */
  field: string
  permission: string
  detail: string
}

const RANK: Record<Transform, number> = { redact: 1, mask: 2, reveal: 3 }

/** redact < mask < reveal. */
export function transformRank(transform: Transform): number {
  return RANK[transform]
}

/**
 * The one relation "a grant is never wider than its grantor": every way `grant` reaches further
 * than `grantor`, or [] when it reaches nowhere further.
 *
 * For a permission outside `token:*` the grantor must hold it. For a token permission P the
 * decision is per token (API.md "Access rules": the first rule by priority that matches the
 * token and lists P decides; plain permissions are a last rule on `/`), so the grant is within
 * its grantor when, for every token, the grant's decision is no more revealing than the
 * grantor's (no access < redact < mask < reveal). A token may sit in several containers and a
 * rule matches when any of them does, so a grantor's earlier `redact` rule on another container
 * still decides for a token that is in both: the grant must repeat such a rule to stay within.
 *
 * Each grant rule is checked over the tokens it decides (it matches them, no earlier grant rule
 * listing P does), against every grantor rule that could decide there with a weaker transform.
 * That is a satisfiability question over token ids and container sets, answered exactly for
 * containers and single conditions and on the safe side (reported as wider) where it would
 * take more than a bounded search.
 */
export function grantExcess(grant: Grants, grantor: Grants): Excess[] {
  const excess: Excess[] = []
  const tokenPermissions = new Set<string>()
  const note = (field: string, p: string) => {
    if (isTokenPermission(p)) tokenPermissions.add(p)
    else if (!holdsPermission(grantor.rules, grantor.permissions, p)) excess.push({ field, permission: p, detail: `${field} grants ${p}, which you do not hold` })
  }
  grant.permissions.forEach((p, i) => note(`permissions[${i}]`, p))
  grant.rules.forEach((rule, i) => new Set(rule.permissions).forEach((p) => note(`rules[${i}]`, p)))
  const budget = { steps: MAX_STEPS }
  for (const p of tokenPermissions) excess.push(...tokenExcess(p, ordered(grant, p), ordered(grantor, p), budget))
  return excess
}

/** A rule as the solver sees it: the atoms that must all hold for it to match. */
interface Scoped {
  field: string
  atoms: Atom[]
  transform: Transform
  where: string
}

export type Atom = { on: 'id' | 'container'; op: 'equals' | 'starts_with'; value: string }

function ordered(grants: Grants, permission: string): Scoped[] {
  const out: Scoped[] = grants.rules
    .map((rule, i) => ({ rule, i }))
    .filter(({ rule }) => rule.permissions.includes(permission))
    .sort((a, b) => a.rule.priority - b.rule.priority)
    .map(({ rule, i }) => ({ field: `rules[${i}]`, atoms: atomsOf(rule), transform: rule.transform, where: whereOf(rule) }))
  const plain = grants.permissions.indexOf(permission)
  if (plain !== -1) out.push({ field: `permissions[${plain}]`, atoms: [], transform: implicitTransform(permission), where: 'plain permissions (every container)' })
  return out
}

function atomsOf(rule: AccessRule): Atom[] {
  if (rule.container !== undefined) return [{ on: 'container', op: 'starts_with', value: rule.container }]
  return (rule.conditions ?? []).map((c: RuleCondition) => ({ on: c.attribute, op: c.operator, value: c.value }))
}

function whereOf(rule: AccessRule): string {
  if (rule.container !== undefined) return `priority ${rule.priority} on ${rule.container}`
  return rule.conditions?.length ? `priority ${rule.priority} with conditions` : `priority ${rule.priority} on every container`
}

function tokenExcess(permission: string, grant: Scoped[], grantor: Scoped[], budget: Budget): Excess[] {
  const excess: Excess[] = []
  grant.forEach((g, i) => {
    const shadows = grant.slice(0, i).map((earlier) => earlier.atoms)
    for (let b = 0; b <= grantor.length; b++) {
      const r = grantor[b]
      if (r !== undefined && transformRank(r.transform) >= transformRank(g.transform)) continue
      const positive = r === undefined ? g.atoms : [...g.atoms, ...r.atoms]
      const negative = [...shadows, ...grantor.slice(0, b).map((earlier) => earlier.atoms)]
      if (!satisfiable(positive, negative, budget)) continue
      const yours = r === undefined ? `you hold no ${permission} there` : `your ${r.where} gives only ${r.transform}`
      excess.push({ field: g.field, permission, detail: `${g.field} grants ${permission} with ${g.transform} (${g.where}) on tokens where ${yours}` })
      break
    }
  })
  return excess
}

// Bounds the search through negated multi-condition rules for one whole grant (at most 100
// rules of 50 conditions each); past it every answer is "satisfiable", which refuses the
// grant: the safe side, and a bound on what one request can cost.
const MAX_STEPS = 200_000

interface Budget {
  steps: number
}

/**
 * Is there a token for which every `positive` atom holds and, for each clause of `negative`,
 * at least one of its atoms fails? (A clause is an earlier rule that must not match.)
 */
export function satisfiable(positive: readonly Atom[], negative: readonly (readonly Atom[])[], budget: Budget = { steps: MAX_STEPS }): boolean {
  const falsified: Atom[] = []
  const search = (clause: number): boolean => {
    if (--budget.steps < 0) return true
    if (!consistent(positive, falsified)) return false
    if (clause === negative.length) return true
    const atoms = negative[clause]!
    // A rule with no atoms matches every token: it can never fail to match.
    for (const atom of atoms) {
      falsified.push(atom)
      const found = search(clause + 1)
      falsified.pop()
      if (found) return true
    }
    return false
  }
  return search(0)
}

/** Whether some token makes every positive atom true and every falsified atom false. */
function consistent(positive: readonly Atom[], falsified: readonly Atom[]): boolean {
  const pick = (atoms: readonly Atom[], on: Atom['on']) => atoms.filter((a) => a.on === on)
  return idPossible(pick(positive, 'id'), pick(falsified, 'id')) && containersPossible(pick(positive, 'container'), pick(falsified, 'container'))
}

function idPossible(positive: Atom[], falsified: Atom[]): boolean {
  const notPrefixes = falsified.filter((a) => a.op === 'starts_with').map((a) => a.value)
  const exact = positive.find((a) => a.op === 'equals')?.value
  if (exact !== undefined) {
    return (
      positive.every((a) => (a.op === 'equals' ? a.value === exact : exact.startsWith(a.value))) &&
      !notPrefixes.some((n) => exact.startsWith(n)) &&
      !falsified.some((a) => a.op === 'equals' && a.value === exact)
    )
  }
  // Prefixes must lie on one chain; the id then extends the longest one freely.
  const longest = positive.reduce((l, a) => (a.value.length > l.length ? a.value : l), '')
  if (!positive.every((a) => longest.startsWith(a.value))) return false
  return !notPrefixes.some((n) => longest.startsWith(n))
}

// A prefix of some valid container: `/`, whole segments, then possibly part of one more.
const CONTAINER_PREFIX = /^\/(?:[a-z0-9_-]+\/)*[a-z0-9_-]*$/

/**
 * Each positive container atom asks for some container of the token; the token may hold one
 * per atom, so each needs its own witness that no falsified atom rules out. A token has at
 * least one container, so with no positive atom some container must still be possible.
 */
function containersPossible(positive: Atom[], falsified: Atom[]): boolean {
  const notPrefixes = falsified.filter((a) => a.op === 'starts_with').map((a) => a.value)
  const notEqual = new Set(falsified.filter((a) => a.op === 'equals').map((a) => a.value))
  const wanted: Atom[] = positive.length ? positive : [{ on: 'container', op: 'starts_with', value: '/' }]
  return wanted.every((atom) => {
    if (notPrefixes.some((n) => atom.value.startsWith(n))) return false
    // Every valid prefix has endless valid extensions, so finitely many exclusions leave one.
    if (atom.op === 'starts_with') return CONTAINER_PREFIX.test(atom.value)
    return isValidContainer(atom.value) && !notEqual.has(atom.value)
  })
}
