import { holdsPermission, implicitTransform, isValidContainer, startsWith, type AccessRule, type RuleCondition, type Transform } from './access-rules.js'
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
  const budget = { work: MAX_WORK }
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

// One list per rule, whatever the permission, so what is learnt about an atom (`somePossible`) is learnt once.
const ruleAtoms = new WeakMap<AccessRule, Atom[]>()

function atomsOf(rule: AccessRule): Atom[] {
  let atoms = ruleAtoms.get(rule)
  if (atoms === undefined) {
    atoms = rule.container !== undefined ? [{ on: 'container', op: 'starts_with', value: rule.container }] : (rule.conditions ?? []).map((c: RuleCondition) => ({ on: c.attribute, op: c.operator, value: c.value }))
    ruleAtoms.set(rule, atoms)
  }
  return atoms
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
      // Past the budget every rule is reported, before its clauses are even gathered.
      budget.work -= i + b
      if (budget.work >= 0) {
        const positive = r === undefined ? g.atoms : [...g.atoms, ...r.atoms]
        const negative = [...shadows, ...grantor.slice(0, b).map((earlier) => earlier.atoms)]
        if (!satisfiable(positive, negative, budget)) continue
      }
      const yours = r === undefined ? `you hold no ${permission} there` : `your ${r.where} gives only ${r.transform}`
      excess.push({ field: g.field, permission, detail: `${g.field} grants ${permission} with ${g.transform} (${g.where}) on tokens where ${yours}` })
      break
    }
  })
  return excess
}

// Bounds the work of one whole grant's checks (at most 100 rules of 50 conditions each), counted
// in atoms compared; past it every answer is "satisfiable", which refuses the grant: the safe
// side, and a bound on what one request can hold the event loop for (about 10-50 ms).
const MAX_WORK = 1_000_000

interface Budget {
  work: number
}

/**
 * Is there a token for which every `positive` atom holds and, for each clause of `negative`,
 * at least one of its atoms fails? (A clause is an earlier rule that must not match.) Whether
 * one atom can fail beside the positive ones does not depend on which other atoms fail (see
 * `failing`), so the clauses can all fail exactly when each has an atom that can: no search
 * over combinations, linear in the atoms. Smallest clauses first, so one that cannot fail (often
 * the grantor's one container) ends the check before the larger ones cost anything.
 */
export function satisfiable(positive: readonly Atom[], negative: readonly (readonly Atom[])[], budget: Budget = { work: MAX_WORK }): boolean {
  // Setting up reads every positive atom and sorts the clauses; each check compares one atom with each positive one.
  budget.work -= positive.length + 4 * negative.length
  const canFail = failing(positive)
  if (canFail === undefined) return false
  const check = (atom: Atom) => (budget.work -= positive.length + 1) < 0 || canFail(atom)
  for (const atoms of [...negative].sort((a, b) => a.length - b.length)) {
    // A rule with no atoms matches every token: it can never fail to match.
    if (!atoms.some(check)) return false
    if (budget.work < 0) return true
  }
  return true
}

/**
 * For tokens on which every `positive` atom holds, whether a given atom can be false; undefined
 * when no such token exists. An id extends the longest positive prefix (or is the positive
 * `equals`), and each positive container atom has a container of its own, so each excluded
 * prefix or value rules out a witness by itself and finitely many leave one: the atoms fail
 * independently of each other.
 */
function failing(positive: readonly Atom[]): ((atom: Atom) => boolean) | undefined {
  const ids = positive.filter((a) => a.on === 'id')
  const exact = ids.find((a) => a.op === 'equals')?.value
  // Prefixes must lie on one chain; the id then extends the longest one freely.
  const id = exact ?? ids.reduce((l, a) => (a.value.length > l.length ? a.value : l), '')
  if (!ids.every((a) => (a.op === 'equals' ? a.value === exact : startsWith(id, a.value)))) return undefined
  // A token has at least one container, so with no positive atom some container must still be possible.
  const containers = positive.filter((a) => a.on === 'container')
  const wanted: readonly Atom[] = containers.length ? containers : [{ on: 'container', op: 'starts_with', value: '/' }]
  if (!wanted.every(somePossible)) return undefined
  return (atom) => {
    if (atom.on === 'id') return atom.op === 'starts_with' ? !startsWith(id, atom.value) : atom.value !== exact
    if (atom.op === 'starts_with') return !wanted.some((w) => startsWith(w.value, atom.value))
    return !wanted.some((w) => w.op === 'equals' && w.value === atom.value)
  }
}

// A prefix of some valid container: `/`, whole segments, then possibly part of one more.
const CONTAINER_PREFIX = /^\/(?:[a-z0-9_-]+\/)*[a-z0-9_-]*$/

const possibleAtoms = new WeakMap<Atom, boolean>()

/** Whether some container satisfies a container atom: every valid prefix has endless valid extensions. Once per atom (a grant's check asks for each many times). */
function somePossible(atom: Atom): boolean {
  let possible = possibleAtoms.get(atom)
  if (possible === undefined) possibleAtoms.set(atom, (possible = atom.op === 'starts_with' ? CONTAINER_PREFIX.test(atom.value) : isValidContainer(atom.value)))
  return possible
}
