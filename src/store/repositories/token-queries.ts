import type { Knex } from 'knex'

/**
 * Tokens' filters and the caller's grants as SQL predicates: what lists, searches and
 * deduplication ask of the tokens table (tokens.ts), kept apart from the statements themselves.
 */

/** Which tokens one access rule matches: a container prefix, conditions (all must hold), or every token. */
export interface ScopeMatch {
  container?: string
  conditions?: { attribute: 'id' | 'container'; operator: 'starts_with' | 'equals'; value: string }[]
}

/**
 * A token-access predicate: the caller's grants as SQL, so lists count and page only tokens it
 * may see. The rules are in priority order and the first that matches a token decides whether
 * it is in scope (`granted`); a token no rule matches is not. Several scopes are ANDed.
 */
export interface AccessScope {
  rules: { match: ScopeMatch; granted: boolean }[]
  /** Tokens with any of these marks set are decided by `marked.rules` instead. */
  marked?: { marks: readonly TokenMark[]; rules: AccessScope['rules'] }
}

/** The columns that mark a token whose equality tests tell more than its mask. */
export type TokenMark = 'fingerprint_beyond_mask' | 'search_beyond_mask'

export interface TokenFilter {
  ids?: string[]
  types?: string[]
  containers?: string[]
  metadata?: Record<string, string>
  fingerprints?: string[]
  searchHashes?: string[]
}

const CONTAINER_EXISTS = 'exists (select 1 from jsonb_array_elements_text(containers) c where'

/** A list's or search's filters (all must hold). */
export function applyFilter(q: Knex.QueryBuilder, f: TokenFilter): void {
  if (f.ids?.length) void q.whereIn('id', f.ids)
  if (f.types?.length) void q.whereIn('type', f.types)
  for (const c of f.containers ?? []) void q.whereRaw(`${CONTAINER_EXISTS} starts_with(c, ?))`, [c])
  if (f.metadata && Object.keys(f.metadata).length) void q.whereRaw('metadata @> ?::jsonb', [JSON.stringify(f.metadata)])
  if (f.fingerprints?.length) void q.whereIn('fingerprint', f.fingerprints)
  for (const h of f.searchHashes ?? []) void q.whereRaw('search_hashes @> ?::jsonb', [JSON.stringify([h])])
}

/** Only the tokens every scope grants (see AccessScope). */
export function applyScopes(q: Knex.QueryBuilder, scopes: readonly AccessScope[]): void {
  for (const { rules, marked } of scopes) {
    if (!marked?.marks.length) {
      void q.where((decided) => applyRules(decided, rules))
      continue
    }
    const isMarked = `(${marked.marks.join(' or ')})`
    void q.where((either) =>
      either
        .where((plain) => plain.whereRaw(`not ${isMarked}`).where((decided) => applyRules(decided, rules)))
        .orWhere((flagged) => flagged.whereRaw(isMarked).where((decided) => applyRules(decided, marked.rules))),
    )
  }
}

function applyRules(q: Knex.QueryBuilder, rules: AccessScope['rules']): void {
  applyFirstMatch(q, rules, 0, rules.findLastIndex((rule) => rule.granted))
}

/**
 * Rule `i` onwards, first match deciding, in one pass: `m OR rest` for a rule that grants,
 * `NOT m AND rest` for one that refuses, `false` past the last rule that grants. Linear in the
 * rules (each rule's match once), where repeating every earlier refusal under each later grant
 * was quadratic: 100 conditional rules made more than 65,535 bind parameters.
 */
function applyFirstMatch(q: Knex.QueryBuilder, rules: AccessScope['rules'], i: number, last: number): void {
  if (i > last) return void q.whereRaw('false')
  const { match, granted } = rules[i]!
  if (i === last) return void q.where((m) => applyMatch(m, match))
  if (granted) void q.where((m) => applyMatch(m, match)).orWhere((rest) => applyFirstMatch(rest, rules, i + 1, last))
  else void q.whereNot((m) => applyMatch(m, match)).where((rest) => applyFirstMatch(rest, rules, i + 1, last))
}

function applyMatch(q: Knex.QueryBuilder, match: ScopeMatch): void {
  void q.whereRaw('true')
  if (match.container !== undefined) void q.whereRaw(`${CONTAINER_EXISTS} starts_with(c, ?))`, [match.container])
  for (const cond of match.conditions ?? []) {
    if (cond.attribute === 'id') {
      void (cond.operator === 'equals' ? q.where('id', cond.value) : q.whereRaw('starts_with(id, ?)', [cond.value]))
    } else {
      void q.whereRaw(`${CONTAINER_EXISTS} ${cond.operator === 'equals' ? 'c = ?' : 'starts_with(c, ?)'})`, [cond.value])
    }
  }
}
