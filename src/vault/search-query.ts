import { ValidationError } from '../errors/index.js'

export interface SearchTerms {
  ids: string[]
  types: string[]
  containers: string[]
  fingerprints: string[]
  /** Every value given per key: terms are ANDed, so two different ones match nothing. */
  metadata: Record<string, string[]>
  data: string[]
}

// field, then for metadata `.key` (quoted, or up to the colon), then `:value` (quoted, or up to a space).
const TERM = /\s*([a-z_]+)(?:\.(?:"((?:[^"\\]|\\.)*)"|([^\s:"]+)))?:(?:"((?:[^"\\]|\\.)*)"|(\S+))/y

/**
 * Distinct terms a query may hold per field. Terms are ANDed, so more than a token can carry
 * (10 containers, 20 search indexes, 20 metadata keys) match nothing, and each one costs the
 * database a condition on every row it scans.
 */
export const SEARCH_TERM_LIMITS = { ids: 100, types: 20, containers: 10, fingerprints: 100, data: 20, metadataKeys: 20 } as const

/**
 * `field:value` terms, ANDed, separated by spaces; a value with spaces is quoted ("a b", with
 * \" and \\ escapes), and so is a metadata key holding a space, a colon or a quote
 * (`metadata."a:b":1`). Fields: id, type, container, fingerprint, metadata.<key>, data. A term
 * given twice counts once.
 */
export function parseSearchQuery(query: string): SearchTerms {
  // Metadata keys are the caller's: a key named `__proto__` must be a key, not the object's prototype.
  const terms: SearchTerms = { ids: [], types: [], containers: [], fingerprints: [], metadata: Object.create(null) as Record<string, string[]>, data: [] }
  let pos = 0
  while (pos < query.length) {
    if (/^\s*$/.test(query.slice(pos))) break
    TERM.lastIndex = pos
    const m = TERM.exec(query)
    if (!m) throw ValidationError.field('query', `expected field:value at position ${pos}`)
    pos = TERM.lastIndex
    const key = m[2] !== undefined ? unescape(m[2]) : m[3]
    const value = m[4] !== undefined ? unescape(m[4]) : m[5]!
    addTerm(terms, m[1]!, key, value)
  }
  return terms
}

const unescape = (quoted: string): string => quoted.replace(/\\(.)/g, '$1')

const LIST_FIELDS = { id: 'ids', type: 'types', container: 'containers', fingerprint: 'fingerprints', data: 'data' } as const

function addTerm(terms: SearchTerms, field: string, key: string | undefined, value: string): void {
  if (field === 'metadata' && key !== undefined && key !== '') {
    const values = terms.metadata[key]
    if (values === undefined && Object.keys(terms.metadata).length >= SEARCH_TERM_LIMITS.metadataKeys) throw tooMany('metadata keys', SEARCH_TERM_LIMITS.metadataKeys)
    if (values === undefined) terms.metadata[key] = [value]
    else if (!values.includes(value)) values.push(value)
    return
  }
  // Own fields only: `constructor` and `__proto__` are spelled like fields and must not find Object.prototype's.
  const list = key === undefined && Object.hasOwn(LIST_FIELDS, field) ? LIST_FIELDS[field as keyof typeof LIST_FIELDS] : undefined
  if (!list) throw ValidationError.field('query', `unknown search field '${field}'; use id, type, container, fingerprint, metadata.<key> or data`)
  if (terms[list].includes(value)) return
  if (terms[list].length >= SEARCH_TERM_LIMITS[list]) throw tooMany(`${field} terms`, SEARCH_TERM_LIMITS[list])
  terms[list].push(value)
}

const tooMany = (what: string, limit: number) => ValidationError.field('query', `at most ${limit} distinct ${what}`)
