import { answerTransform, authorizeContainers, authorizeMove, refuseChosenId, authorizeToken, authorizeViewChange, equalityScopes, tokenDecision } from '../auth/policies.js'
import type { Principal } from '../auth/principal.js'
import { AppError, ValidationError } from '../errors/index.js'
import { isUniqueViolation, type Store, type StoreTransaction, type TokenRecord } from '../store/index.js'
import { dataAad, decryptData, openData, unwrapDataKey } from './crypto/index.js'
import type { TokenCache, UsableToken } from './token-cache.js'
import { buildTokenRecord, mergePatch, wantedFingerprint, type TokenFields, type VaultCrypto } from './token-builder.js'
import { tokenListing } from './token-listing.js'
import { allowedMask, applyTransform, canonicalJson, getTokenType, isTokenTypeName, type Transform, type TokenTypeName } from './types/index.js'
import type { VaultKeys } from './vault-keys.js'
import { requireReady } from './vault-keys.js'

/** A token as a caller may see it: the row plus `data` shaped by the answer's transform (see `answerTransform`). */
export interface TokenView {
  record: TokenRecord
  /** undefined: omit `data` (redact, or mask without a mask). */
  data: unknown
  /** What the answer may show; under `redact` nothing derived from the data (the fingerprint) either. */
  transform: Transform
  /** A create that found this token by deduplication: nothing was stored. */
  existing?: true
  /** An update by a key that may not read the token: the answer names it and nothing more. */
  unreadable?: true
}

export interface CreateTokenInput extends TokenFields {
  deduplicate_token?: boolean
}

export type TokenPatch = Partial<Omit<TokenFields, 'type' | 'id' | 'metadata'>> & { metadata?: Record<string, string | null> | null }

/**
 * `renderMaxBytes`: how much token data one request's expressions may expand to. Only distinct
 * tokens are counted against SVC_MAX_EXPRESSION_TOKENS; without this bound a body repeating
 * one large token's reference built answers, forwarded bodies and Reactor inputs of gigabytes
 * (the process died of it).
 */
export function tokenService(store: Store, keys: VaultKeys, cache: TokenCache, options: { renderMaxBytes: number }) {
  const crypto = (): VaultCrypto => requireReady(keys)

  function view(record: TokenRecord, transform: Transform, data?: unknown): TokenView {
    if (transform === 'redact') return { record, data: undefined, transform }
    const plaintext = data === undefined ? decrypt(record) : data
    return { record, data: shape(transform, record, plaintext), transform }
  }

  function decrypt(record: TokenRecord): unknown {
    return decryptData(
      { keyId: record.key_id, encryptedKey: record.encrypted_key, ciphertext: record.ciphertext },
      { tenantId: record.tenant_id, tokenId: record.id },
      crypto().keyring,
    )
  }

  /** The live token `id` of the caller's tenant, 404 otherwise; inside `lockIn` its row stays locked until that transaction ends. */
  async function find(principal: Principal, id: string, lockIn?: StoreTransaction): Promise<TokenRecord> {
    crypto()
    const record = id.length > 400 ? undefined : lockIn ? await store.tokens.findForUpdate(principal.tenantId, id, lockIn) : await store.tokens.findById(principal.tenantId, id)
    if (!record) throw new AppError('not_found', { detail: 'No token with this id.' })
    return record
  }

  /** PATCH's read-modify-write inside `trx`, the token's row locked from the read to the write. */
  async function patchLocked(principal: Principal, id: string, patch: TokenPatch, trx: StoreTransaction): Promise<{ next: TokenRecord; data: unknown }> {
    const current = await find(principal, id, trx)
    authorizeToken(principal, 'token:update', current)
    // A key that may not read the token must not learn its views either: whatever it sends for
    // them counts as a change (no 200 for a right guess), and their render errors are not named.
    const readable = tokenDecision(principal, 'token:read', current) !== undefined
    authorizeViewChange(principal, current, changedViews(current, patch, readable))
    const data = patch.data === undefined ? decrypt(current) : mergePatch(decrypt(current), patch.data)
    const fields: TokenFields = {
      type: current.type as TokenTypeName,
      data,
      containers: patch.containers ?? current.containers,
      metadata: patch.metadata === undefined ? current.metadata : patch.metadata === null ? {} : (mergePatch(current.metadata, patch.metadata) as Record<string, string>),
      mask: patch.mask === undefined ? current.mask : patch.mask,
      fingerprint_expression: patch.fingerprint_expression === undefined ? current.fingerprint_expression : patch.fingerprint_expression,
      search_indexes: patch.search_indexes === undefined ? current.search_indexes : patch.search_indexes,
      // Unchanged expiry is carried over below, not re-validated as "must be in the future".
      expires_at: patch.expires_at,
    }
    const build = () => buildTokenRecord(principal.tenantId, fields, principal.id, crypto(), current)
    const next = readable ? build() : blindly(build)
    if (patch.expires_at === undefined) next.expires_at = current.expires_at
    if (canonicalJson(next.containers) !== canonicalJson(current.containers)) authorizeMove(principal, current, next)
    authorizeToken(principal, 'token:update', next)
    if (!(await store.tokens.update(principal.tenantId, id, next, trx))) throw new AppError('not_found', { detail: 'No token with this id.' })
    return { next, data }
  }

  /**
   * Each live token of `ids`, from the cache or one query, with a copy of its data key that the
   * caller wipes after use: an entry that leaves the cache (its TTL, room for others, a change)
   * has its key wiped at once, which may happen while this request still waits for the query.
   */
  async function loadUsable(tenantId: string, ids: ReadonlySet<string>): Promise<Map<string, UsableToken>> {
    const found = new Map<string, UsableToken>()
    const own = (token: UsableToken): UsableToken => ({ record: token.record, dataKey: Buffer.from(token.dataKey), aad: token.aad })
    const missing: string[] = []
    for (const id of ids) {
      const hit = cache.get(tenantId, id)
      if (hit) found.set(id, own(hit))
      else missing.push(id)
    }
    if (missing.length === 0) return found
    const { keyring } = crypto()
    const generation = cache.generation()
    for (const row of await store.tokens.findManyForUse(tenantId, missing)) {
      const binding = { tenantId, tokenId: row.id }
      const dataKey = unwrapDataKey({ keyId: row.key_id, encryptedKey: row.encrypted_key }, binding, keyring)
      const token: UsableToken = { record: row, dataKey, aad: dataAad(binding) }
      found.set(row.id, own(token))
      cache.put(token, generation)
    }
    return found
  }

  /**
   * New tokens that took expired tokens' ids (or may have: a write only `landed` could confirm)
   * leave every process's cache, where the old token may still be served until that process's
   * clock reaches its expiry.
   */
  async function forgetReplaced(tenantId: string, ids: readonly string[]): Promise<void> {
    await cache.invalidate(tenantId, ids)
  }

  return {
    decrypt,
    view,
    forgetReplaced,
    ...tokenListing({ store, crypto, view }),

    async createToken(principal: Principal, input: CreateTokenInput): Promise<TokenView> {
      refuseChosenId(principal, input.id)
      const record = buildTokenRecord(principal.tenantId, input, principal.id, crypto())
      authorizeContainers(principal, 'token:create', record.id, record.containers)
      const fingerprint = input.deduplicate_token ? record.fingerprint : null
      // Returning the existing token says "this value is stored there": only where the answer
      // would show its fingerprint anyway. Anyone else gets a new token, as without the flag.
      // Only a token that lives at least as long as asked is found. Concurrent creates of one value
      // take turns from the look-up to the commit (the lock), so the second finds the first's
      // token instead of storing its own.
      const insert = async (trx?: StoreTransaction): Promise<Awaited<ReturnType<typeof store.tokens.insert>> | TokenRecord> => {
        if (trx === undefined || fingerprint === null) return store.tokens.insert(record, trx)
        await store.tokens.lockFingerprints(principal.tenantId, [[record.type, fingerprint]], trx)
        const [existing] = await store.tokens.findByFingerprints(principal.tenantId, [wantedFingerprint(record, fingerprint)], equalityScopes(principal, 'token:create', ['fingerprint']), trx)
        return existing ?? store.tokens.insert(record, trx)
      }
      let inserted: Awaited<ReturnType<typeof insert>> | undefined
      try {
        inserted = await store.confirmed(() => (fingerprint === null ? insert() : store.transaction(insert)), () => store.tokens.stored(record))
      } catch (err) {
        if (isUniqueViolation(err)) throw new AppError('conflict', { detail: 'A token with this id exists.', cause: err })
        throw err
      }
      if (typeof inserted === 'object') return Object.assign(view(inserted, answerTransform(principal, 'token:create', inserted)), { existing: true as const })
      if (inserted === 'taken') throw new AppError('conflict', { detail: 'A token with this id exists.' })
      if (inserted !== 'inserted') await forgetReplaced(principal.tenantId, [record.id])
      return view(record, answerTransform(principal, 'token:create', record), input.data)
    },

    async getToken(principal: Principal, id: string): Promise<TokenView> {
      const record = await find(principal, id)
      return view(record, authorizeToken(principal, 'token:read', record))
    },

    async updateToken(principal: Principal, id: string, patch: TokenPatch): Promise<TokenView> {
      // The token is read locked and written in one transaction: concurrent patches (merges of
      // metadata or data) apply one after another instead of each overwriting the others.
      const { next, data } = await store.transaction((trx) => patchLocked(principal, id, patch, trx))
      await cache.invalidate(principal.tenantId, id)
      // The answer shows no more than the caller could read: a write-only key sent data, it does
      // not get the merged data back, nor the metadata and settings the token already had.
      const answer = view(next, answerTransform(principal, 'token:update', next), data)
      return tokenDecision(principal, 'token:read', next) === undefined ? { ...answer, unreadable: true } : answer
    },

    async deleteToken(principal: Principal, id: string): Promise<void> {
      // Locked from the check to the delete: a concurrent move out of the caller's reach is seen.
      await store.transaction(async (trx) => {
        authorizeToken(principal, 'token:delete', await find(principal, id, trx))
        await store.tokens.delete(principal.tenantId, id, trx)
      })
      await cache.invalidate(principal.tenantId, id)
    },

    /**
     * Every token an expression set references, checked for `permission`; the lookup returns
     * each token's data shaped by its rule's transform. Tokens not in the cache are loaded
     * with one query. Each lookup counts its token's stored size (the ciphertext's, at least
     * what the data renders to) against `renderMaxBytes`, and refuses with 413 past it; a lookup
     * that does not reveal counts only what it renders (`null` for redact, the masked view): where
     * the 413 starts must not tell a key the length of data it may not see.
     */
    async resolve(principal: Principal, tokenIds: ReadonlySet<string>, permission: 'token:use' | 'token:read'): Promise<(id: string) => unknown> {
      if (tokenIds.size === 0) return unknownToken
      const usable = await loadUsable(principal.tenantId, tokenIds)
      const values = new Map<string, { value: unknown; bytes: number }>()
      try {
        for (const id of tokenIds) {
          const token = usable.get(id)
          if (!token) throw new AppError('bad_request', { detail: `Unknown token ${JSON.stringify(id)}.` })
          const transform = authorizeToken(principal, permission, token.record)
          const data = transform === 'redact' ? undefined : openData(token.dataKey, token.record.ciphertext, token.aad)
          const shaped = data === undefined ? undefined : shape(transform, token.record, data)
          values.set(id, { value: shaped === undefined ? null : shaped, bytes: transform === 'reveal' ? token.record.ciphertext.length : renderedBytes(shaped) })
        }
      } finally {
        for (const token of usable.values()) token.dataKey.fill(0)
      }
      let spent = 0
      return (id) => {
        const found = values.get(id)
        if (found === undefined) return unknownToken(id)
        if ((spent += found.bytes) > options.renderMaxBytes) throw renderTooLarge(options.renderMaxBytes)
        return found.value
      }
    },
  }
}

/** `data` under `transform`; a mask is rendered only while it stays within its type's limits. */
function shape(transform: Transform, record: Pick<TokenRecord, 'type' | 'mask'>, data: unknown): unknown {
  const mask = transform === 'mask' && isTokenTypeName(record.type) ? allowedMask(getTokenType(record.type), record.mask) : null
  return applyTransform(transform, { data, mask })
}

const VIEWS = ['mask', 'fingerprint_expression', 'search_indexes'] as const

/** The data-derived views a patch changes: sent with a value other than the stored one, or sent at all by a key that may not read them. */
function changedViews(current: TokenRecord, patch: TokenPatch, readable: boolean): string[] {
  return VIEWS.filter((field) => patch[field] !== undefined && (!readable || canonicalJson(patch[field]) !== canonicalJson(current[field])))
}

/** An update by a key that may not read the token: a stored view its data does not render under is not named (which index, which filter, where). */
function blindly<T>(build: () => T): T {
  try {
    return build()
  } catch (err) {
    if (err instanceof ValidationError && Object.keys(err.errors ?? {}).some((field) => VIEWS.some((view) => field.startsWith(view)))) {
      throw ValidationError.field('data', "does not render under the token's stored expressions")
    }
    throw err
  }
}

function renderTooLarge(limit: number): AppError {
  return new AppError('payload_too_large', { detail: `The expressions reference more than ${limit} bytes of token data (a token counts once per reference).` })
}

function unknownToken(id: string): never {
  throw new AppError('bad_request', { detail: `Unknown token ${JSON.stringify(id)}.` })
}

export type TokenService = ReturnType<typeof tokenService>

/** What a value the caller may see renders to, in bytes (`null` for none). */
function renderedBytes(value: unknown): number {
  return value === undefined ? 4 : Buffer.byteLength(JSON.stringify(value) ?? '')
}
