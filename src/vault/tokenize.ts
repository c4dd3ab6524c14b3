import { answerTransform, authorizeContainers, equalityScopes, refuseChosenId } from '../auth/policies.js'
import type { Principal } from '../auth/principal.js'
import { AppError, ValidationError, type FieldErrors } from '../errors/index.js'
import { compileValue, ExpressionError } from '../expressions/index.js'
import { findUnsafeText } from '../shapes/unsafe-text.js'
import type { Store, TokenRecord } from '../store/index.js'
import { isUniqueViolation } from '../store/index.js'
import { buildTokenRecord, wantedFingerprint, type TokenFields } from './token-builder.js'
import type { TokenService, TokenView } from './token-service.js'
import { isTokenTypeName, TOKEN_TYPE_NAMES } from './types/index.js'
import { requireReady, type VaultKeys } from './vault-keys.js'

const MAX_TOKENS_PER_CALL = 1000
/** The fields of POST /tokens: an object with `type` and `data` is a full token and may have only these. */
const FULL_TOKEN_KEYS = new Set(['id', 'type', 'data', 'containers', 'metadata', 'mask', 'fingerprint_expression', 'search_indexes', 'deduplicate_token', 'expires_at'])

/** What tokenizing writes with: the store (one transaction), the vault keys and the token service. */
/**
 * Told of a tokenize's tokens before its caller gets them (`token.create`, fail-closed): their
 * ids, the views an answer shows, and whether any was stored (`false` when deduplication found
 * every one: nothing changed).
 */
export type TokensCreatedHook = (tokenIds: string[], views: TokenView[], stored: boolean) => Promise<void>

export interface TokenizeDeps {
  store: Store
  keys: VaultKeys
  tokens: TokenService
}

/**
 * `POST /tokenize`: every leaf becomes a `token` token and every object with `type` and `data`
 * a full token, validated as POST /tokens validates its body (`deduplicate_token` included); the
 * answer has the same shape. All or nothing: one transaction, and nothing is written unless
 * every token validates and is permitted. Full tokens in the answer show no more than each of
 * `viewers` may read (a Reactor's `{tokenize}` result goes to its caller).
 */
export async function tokenizeValue(
  deps: TokenizeDeps,
  principal: Principal,
  value: unknown,
  present: (view: TokenView) => unknown,
  viewers: readonly Principal[] = [principal],
  /** Awaited after the insert and before the answer exists: the request's audit record (fail-closed). */
  audit?: TokensCreatedHook,
): Promise<unknown> {
  const crypto = requireReady(deps.keys)
  // A body was checked as it was parsed; a Reactor's `tokenize` result or `req.svc.tokenize` value
  // was not, and must be refused as that body would be, before any id or metadata reaches the store.
  const unsafe = findUnsafeText(value)
  if (unsafe !== undefined) throw new ValidationError(unsafe)
  interface Entry {
    record: TokenRecord
    data: unknown
    full: boolean
    deduplicate?: boolean
    existing?: TokenRecord
    /** The entry of this call deduplicating the same value that asks the longest life: this one answers with its token. */
    sameAs?: Entry
  }
  const records: Entry[] = []
  const errors: FieldErrors = {}
  const fieldPath = (path: string, field: string) => [path, field].filter(Boolean).join('.') || 'body'

  const walk = (node: unknown, path: string): unknown => {
    if (node === null) return null
    if (records.length >= MAX_TOKENS_PER_CALL) throw new AppError('bad_request', { detail: `At most ${MAX_TOKENS_PER_CALL} tokens per request.` })
    if (Array.isArray(node)) return node.map((child, i) => walk(child, `${path}[${i}]`))
    if (typeof node === 'object') {
      if (isFullToken(node)) return collectFull(node, path)
      return Object.fromEntries(Object.entries(node).map(([k, child]) => [k, walk(child, path ? `${path}.${k}` : k)]))
    }
    return collect({ type: 'token', data: node }, path, false)
  }

  const collectFull = (node: Record<string, unknown>, path: string): number => {
    const { deduplicate_token: deduplicate, ...fields } = node
    const problems: FieldErrors = {}
    for (const key of Object.keys(node)) if (!FULL_TOKEN_KEYS.has(key)) problems[key] = ['is not a known field']
    if (!isTokenTypeName(fields.type)) problems.type = [`must be one of: ${TOKEN_TYPE_NAMES.join(', ')}`]
    if (deduplicate !== undefined && typeof deduplicate !== 'boolean') problems.deduplicate_token = ['must be a boolean']
    for (const [field, messages] of Object.entries(problems)) (errors[fieldPath(path, field)] ??= []).push(...messages)
    return Object.keys(problems).length ? -1 : collect(fields as unknown as TokenFields, path, true, deduplicate === true)
  }

  const collect = (fields: TokenFields, path: string, full: boolean, deduplicate = false): number => {
    try {
      refuseChosenId(principal, fields.id)
      const record = buildTokenRecord(principal.tenantId, fields, principal.id, crypto)
      authorizeContainers(principal, 'token:create', record.id, record.containers)
      records.push({ record, data: fields.data, full, deduplicate })
    } catch (err) {
      if (!(err instanceof AppError)) throw err
      const entries = err.errors ? Object.entries(err.errors) : [['', [err.detail ?? err.title]] as const]
      for (const [field, messages] of entries) (errors[fieldPath(path, field)] ??= []).push(...messages)
      if (err.status === 403 && !err.errors) throw err
    }
    return records.length - 1
  }

  const shape = walk(value, '')
  if (Object.keys(errors).length) throw new ValidationError(errors)
  // One value: the same type and fingerprint made by the same effective expression (see `wantedFingerprint`).
  const valueOf = ({ record }: Entry) => {
    const wanted = wantedFingerprint(record, record.fingerprint!)
    return `${wanted.type}\u0000${wanted.fingerprint}\u0000${wanted.expression}`
  }
  const deduplicated = records.filter((entry) => entry.deduplicate && entry.record.fingerprint)
  // One value twice in one call is one token: the one of the entry that asks the longest life
  // (the first among equals), so every entry gets a token that lives at least as long as it asked.
  const lifetime = (entry: Entry) => entry.record.expires_at?.getTime() ?? Infinity
  const longestOfValue = new Map<string, Entry>()
  for (const entry of deduplicated) {
    const key = valueOf(entry)
    const longest = longestOfValue.get(key)
    if (longest === undefined || lifetime(entry) > lifetime(longest)) longestOfValue.set(key, entry)
  }
  for (const entry of deduplicated) {
    const longest = longestOfValue.get(valueOf(entry))
    if (longest !== entry) entry.sameAs = longest
  }
  // As POST /tokens: the existing token only where every viewer would see its fingerprint anyway.
  const sameValue = deduplicated.length ? [...equalityScopes(principal, 'token:create', ['fingerprint']), ...viewers.filter((v) => v !== principal).flatMap((v) => equalityScopes(v, 'token:read', ['fingerprint']))] : []
  let fresh: typeof records = []
  const insertAll = () =>
    deps.store.transaction(async (trx) => {
      if (longestOfValue.size) {
        // Concurrent calls deduplicating the same value take turns from the look-up to the
        // commit, so the second finds the first's token instead of storing its own.
        const longest = [...longestOfValue.values()]
        await deps.store.tokens.lockFingerprints(principal.tenantId, longest.map(({ record }) => [record.type, record.fingerprint!] as const), trx)
        const found = await deps.store.tokens.findByFingerprints(principal.tenantId, longest.map(({ record }) => wantedFingerprint(record, record.fingerprint!)), sameValue, trx)
        longest.forEach((entry, i) => (entry.existing = found[i]))
      }
      fresh = records.filter((entry) => !entry.existing && !entry.sameAs)
      const ids = fresh.map(({ record }) => record.id)
      if (new Set(ids).size < ids.length) throw new AppError('conflict', { detail: 'Two of these tokens have the same id.' })
      const stored = await deps.store.tokens.insertMany(fresh.map(({ record }) => record), trx)
      if (stored === 'taken') throw new AppError('conflict', { detail: 'A token with one of these ids exists.' })
      return stored.replaced
    })
  try {
    // All or nothing: if the COMMIT's answer was lost, one record tells whether all landed.
    const replaced = records.length === 0 ? [] : await deps.store.confirmed(insertAll, () => (fresh[0] ? deps.store.tokens.stored(fresh[0].record) : Promise.resolve(false)))
    await deps.tokens.forgetReplaced(principal.tenantId, replaced ?? fresh.map(({ record }) => record.id))
  } catch (err) {
    if (isUniqueViolation(err)) throw new AppError('conflict', { detail: 'A token with one of these ids exists.', cause: err })
    throw err
  }
  for (const entry of records) {
    if (entry.sameAs === undefined) continue
    // The token stored (or found) for the longest-lived: shown as it is, not with this entry's data,
    // which may differ where the fingerprint does not look (a card's CVC or expiry).
    const longest = entry.sameAs
    entry.record = longest.record
    entry.data = longest.data
    entry.existing = longest.existing
  }
  const views = records.map(({ record, data, full, existing }) => {
    if (existing) return deps.tokens.view(existing, answerTransform(principal, 'token:create', existing, viewers))
    return full ? deps.tokens.view(record, answerTransform(principal, 'token:create', record, viewers), data) : undefined
  })
  await audit?.(
    [...new Set(records.map(({ record, existing }) => (existing ?? record).id))],
    views.filter((v) => v !== undefined),
    fresh.length > 0,
  )
  return fill(shape, views.map((view, i) => (view ? present(view) : records[i]!.record.id)))
}

function isFullToken(node: object): node is Record<string, unknown> {
  return Object.hasOwn(node, 'type') && Object.hasOwn(node, 'data')
}

/** Replaces the record indexes `walk` left in the shape with the presented answers. */
function fill(shape: unknown, answers: unknown[]): unknown {
  if (typeof shape === 'number') return answers[shape]
  if (Array.isArray(shape)) return shape.map((s) => fill(s, answers))
  if (shape !== null && typeof shape === 'object') return Object.fromEntries(Object.entries(shape).map(([k, v]) => [k, fill(v, answers)]))
  return shape
}

/** `POST /detokenize` (under `token:read`) and Reactors (`token:use`): the same shape with every expression evaluated. */
export async function detokenizeValue(
  tokens: TokenService,
  principal: Principal,
  value: unknown,
  maxTokens: number,
  permission: 'token:read' | 'token:use' = 'token:read',
  /** Awaited once the tokens are resolved and before any plaintext is rendered: the audit record (fail-closed). */
  audit?: (tokenIds: ReadonlySet<string>) => Promise<void>,
): Promise<unknown> {
  try {
    const compiled = compileValue(value, { maxTokens })
    const lookup = await tokens.resolve(principal, compiled.tokenIds, permission)
    await audit?.(compiled.tokenIds)
    return compiled.render(lookup)
  } catch (err) {
    if (err instanceof ExpressionError) throw new AppError('bad_request', { detail: err.message, cause: err })
    throw err
  }
}
