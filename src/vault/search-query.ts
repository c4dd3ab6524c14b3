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

const TERM = /\s*([a-z_]+(?:\.[A-Za-z0-9_-]+)?):(?:"((?:[^"\\]|\\.)*)"|(\S+))/y

/**
 * `field:value` terms, ANDed, separated by spaces; a value with spaces is quoted ("a b", with
 * \" and \\ escapes). Fields: id, type, container, fingerprint, metadata.<key>, data.
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
    const field = m[1]!
    const value = m[2] !== undefined ? m[2].replace(/\\(.)/g, '$1') : m[3]!
    addTerm(terms, field, value)
  }
  return terms
}

const LIST_FIELDS = { id: 'ids', type: 'types', container: 'containers', fingerprint: 'fingerprints', data: 'data' } as const

function addTerm(terms: SearchTerms, field: string, value: string): void {
  if (field.startsWith('metadata.')) {
    ;(terms.metadata[field.slice('metadata.'.length)] ??= []).push(value)
    return
  }
  // Own fields only: `constructor` and `__proto__` are spelled like fields and must not find Object.prototype's.
  const list = Object.hasOwn(LIST_FIELDS, field) ? LIST_FIELDS[field as keyof typeof LIST_FIELDS] : undefined
  if (!list) throw ValidationError.field('query', `unknown search field '${field}'; use id, type, container, fingerprint, metadata.<key> or data`)
  terms[list].push(value)
}
