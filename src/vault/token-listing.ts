import type { TokenPermission } from '../auth/permissions.js'
import { answerTransform, equalityScopes, tokenScopes, type EqualityTest } from '../auth/policies.js'
import type { Principal } from '../auth/principal.js'
import type { AccessScope, Page, Store, TokenFilter, TokenPosition, TokenRecord } from '../store/index.js'
import { parseSearchQuery } from './search-query.js'
import type { VaultCrypto } from './token-builder.js'
import type { Transform } from './types/index.js'

/** A keyset page (`/v2`): `next` is where the following page starts, absent on the last one. */
export interface CursorPage<T> {
  items: T[]
  next: TokenPosition | undefined
}

/**
 * Listing and searching tokens, by page number and (`/v2`) by position. Each row is answered
 * under the caller's decision on it; what the query may match at all is its access scope.
 */
export function tokenListing<V>(deps: {
  store: Store
  crypto: () => VaultCrypto
  /** A row as the caller may see it under `transform` (token-service's view). */
  view: (record: TokenRecord, transform: Transform) => V
}) {
  const { store, crypto, view } = deps

  async function listPage(principal: Principal, permission: TokenPermission, filter: TokenFilter, scopes: AccessScope[], page: number, size: number): Promise<Page<V>> {
    crypto()
    const result = await store.tokens.list(principal.tenantId, filter, scopes, page, size)
    return { total: result.total, items: result.items.map((r) => view(r, answerTransform(principal, permission, r))) }
  }

  /** The v2 form of listPage: the same scope and per-row decision, paged by position. */
  async function listFrom(principal: Principal, permission: TokenPermission, filter: TokenFilter, scopes: AccessScope[], after: TokenPosition | undefined, size: number): Promise<CursorPage<V>> {
    crypto()
    // One row more than asked tells whether another page follows, without a count.
    const rows = await store.tokens.listAfter(principal.tenantId, filter, scopes, after, size + 1)
    const items = rows.slice(0, size)
    const last = items.at(-1)
    const next = rows.length > size && last ? { createdAt: last.created_at, id: last.id } : undefined
    return { items: items.map((r) => view(r, answerTransform(principal, permission, r))), next }
  }

  /**
   * Terms and filters on values derived from the data are equality tests of the plaintext: they
   * match only tokens an answer would show at least masked (see `equalityScopes`).
   */
  function scopesFor(principal: Principal, permission: TokenPermission, filter: TokenFilter): AccessScope[] {
    const scopes = tokenScopes(principal, permission)
    const tests: EqualityTest[] = []
    if (filter.fingerprints?.length) tests.push('fingerprint')
    if (filter.searchHashes?.length) tests.push('search')
    if (tests.length) scopes.push(...equalityScopes(principal, permission, tests))
    return scopes
  }

  /** A search query as a filter, or undefined when its terms cannot all hold (nothing matches). */
  function searchFilter(principal: Principal, query: string): TokenFilter | undefined {
    const terms = parseSearchQuery(query)
    const { hasher } = crypto()
    // Terms are ANDed: two different values for one single-valued field match nothing.
    const single = [terms.ids, terms.types, terms.fingerprints, ...Object.values(terms.metadata)]
    if (single.some((values) => new Set(values).size > 1)) return undefined
    const metadata = Object.create(null) as Record<string, string>
    for (const key in terms.metadata) metadata[key] = terms.metadata[key]![0]!
    return {
      ids: terms.ids,
      types: terms.types,
      containers: terms.containers,
      metadata,
      fingerprints: terms.fingerprints,
      searchHashes: terms.data.map((v) => hasher.searchIndexHash(principal.tenantId, v)),
    }
  }

  return {
    listTokens: (principal: Principal, filter: TokenFilter, page: number, size: number) =>
      listPage(principal, 'token:read', filter, scopesFor(principal, 'token:read', filter), page, size),

    async searchTokens(principal: Principal, query: string, page: number, size: number): Promise<Page<V>> {
      const filter = searchFilter(principal, query)
      if (!filter) return { total: 0, items: [] }
      return listPage(principal, 'token:search', filter, scopesFor(principal, 'token:search', filter), page, size)
    },

    listTokensFrom: (principal: Principal, filter: TokenFilter, after: TokenPosition | undefined, size: number) =>
      listFrom(principal, 'token:read', filter, scopesFor(principal, 'token:read', filter), after, size),

    async searchTokensFrom(principal: Principal, query: string, after: TokenPosition | undefined, size: number): Promise<CursorPage<V>> {
      const filter = searchFilter(principal, query)
      if (!filter) return { items: [], next: undefined }
      return listFrom(principal, 'token:search', filter, scopesFor(principal, 'token:search', filter), after, size)
    },
  }
}
