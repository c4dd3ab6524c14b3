import { Type, type Static } from '@sinclair/typebox'
import { TOKEN_LIMITS } from '../../vault/token-builder.js'
import { TOKEN_ID_MAX_LENGTH } from '../../expressions/token-id.js'
import { TOKEN_TYPE_NAMES } from '../../vault/types/index.js'
import { AuditFields, DateTime, PageQuery, StringEnum, Uuid, paginated } from './common.js'

export const TokenTypeSchema = StringEnum([...TOKEN_TYPE_NAMES])

const L = TOKEN_LIMITS
const Containers = Type.Array(Type.String({ maxLength: L.containerLength }), { minItems: 1, maxItems: L.containers, uniqueItems: true })
// TypeBox drops a Record key schema's lengths (its keys become a pattern): `propertyNames` keeps them.
const MetadataKeys = { propertyNames: { minLength: 1, maxLength: L.metadataKeyLength }, maxProperties: L.metadataKeys }
const MetadataValue = Type.String({ maxLength: L.metadataValueLength })
const Metadata = Type.Record(Type.String(), MetadataValue, MetadataKeys)
const SearchIndexes = Type.Array(Type.String({ minLength: 1, maxLength: L.expressionLength }), { maxItems: L.searchIndexes })
const Expression = Type.String({ minLength: 1, maxLength: L.expressionLength })

export const CreateTokenBody = Type.Object(
  {
    id: Type.Optional(Type.String()),
    type: TokenTypeSchema,
    data: Type.Unknown(),
    containers: Type.Optional(Containers),
    metadata: Type.Optional(Metadata),
    mask: Type.Optional(Type.Unknown()),
    fingerprint_expression: Type.Optional(Expression),
    search_indexes: Type.Optional(SearchIndexes),
    deduplicate_token: Type.Optional(Type.Boolean({ description: 'Return the existing token with the same fingerprint that lives at least as long as this one would (no expires_at: one that never expires), if the key sees it at least masked (token:create and token:read); otherwise a new token, so the answer never tells whether the value was stored.' })),
    expires_at: Type.Optional(Type.Union([DateTime, Type.Null()])),
  },
  { additionalProperties: false, required: ['type', 'data'] },
)
export type CreateTokenBody = Static<typeof CreateTokenBody>

/** `application/merge-patch+json`: null removes an optional field; `type` and `id` never change. */
export const UpdateTokenBody = Type.Object(
  {
    data: Type.Optional(Type.Unknown()),
    containers: Type.Optional(Containers),
    metadata: Type.Optional(Type.Union([Type.Record(Type.String(), Type.Union([MetadataValue, Type.Null()]), MetadataKeys), Type.Null()])),
    mask: Type.Optional(Type.Unknown()),
    fingerprint_expression: Type.Optional(Type.Union([Expression, Type.Null()])),
    search_indexes: Type.Optional(Type.Union([SearchIndexes, Type.Null()])),
    expires_at: Type.Optional(Type.Union([DateTime, Type.Null()])),
  },
  { additionalProperties: false },
)
export type UpdateTokenBody = Static<typeof UpdateTokenBody>

export const ListTokensQuery = Type.Object(
  {
    id: Type.Array(Type.String({ maxLength: 400 }), { default: [], maxItems: 100 }),
    type: Type.Array(TokenTypeSchema, { default: [] }),
    container: Type.Array(Type.String({ maxLength: 400 }), { default: [], maxItems: 10 }),
    ...PageQuery,
  },
  { additionalProperties: false },
)
export type ListTokensQuery = Static<typeof ListTokensQuery>

export const SearchTokensBody = Type.Object(
  {
    query: Type.String({ maxLength: 4000 }),
    ...PageQuery,
  },
  { additionalProperties: false },
)
export type SearchTokensBody = Static<typeof SearchTokensBody>

/**
 * The longest `pagination.next` encodeCursor makes: base64url of `["<24-char time>","<id>"]`,
 * the id JSON-escaped, at most 3 UTF-8 bytes per UTF-16 unit (a `"` escaped is 2; control
 * characters, which JSON spells in 6, cannot be in an id). Every cursor handed out is taken back.
 */
const CURSOR_MAX_LENGTH = Math.ceil((32 + 3 * TOKEN_ID_MAX_LENGTH) / 3) * 4

/** `start` is the opaque `pagination.next` of the page before; absent for the first page. */
const Cursor = Type.String({ minLength: 1, maxLength: CURSOR_MAX_LENGTH, description: 'The `pagination.next` of the previous page.' })

/** `/v2/tokens`, as the hosted service's node SDK sends it: `metadata` is one JSON object, all of whose pairs must match. */
export const ListTokensV2Query = Type.Object(
  {
    id: Type.Array(Type.String({ maxLength: 400 }), { default: [], maxItems: 100 }),
    type: Type.Array(TokenTypeSchema, { default: [] }),
    container: Type.Array(Type.String({ maxLength: 400 }), { default: [], maxItems: 10 }),
    fingerprint: Type.Array(Type.String({ maxLength: 100 }), { default: [], maxItems: 100 }),
    metadata: Type.Optional(Type.String({ maxLength: 20_000, description: 'A JSON object of metadata key/value strings, e.g. {"customer":"42"}.' })),
    start: Type.Optional(Cursor),
    size: PageQuery.size,
  },
  { additionalProperties: false },
)
export type ListTokensV2Query = Static<typeof ListTokensV2Query>

export const MetadataFilter = Metadata

export const SearchTokensV2Body = Type.Object(
  {
    query: Type.String({ maxLength: 4000, default: '' }),
    start: Type.Optional(Cursor),
    size: PageQuery.size,
  },
  { additionalProperties: false },
)
export type SearchTokensV2Body = Static<typeof SearchTokensV2Body>

/** A token as presented: `data` only as the deciding rule's transform shapes it (absent when redacted). */
export const TokenResponse = Type.Object({
  id: Type.String(),
  tenant_id: Uuid,
  type: TokenTypeSchema,
  data: Type.Optional(Type.Unknown({ description: 'Shaped by the transform of the rule that decided: plaintext (reveal), the rendered mask (mask), absent (redact).' })),
  mask: Type.Optional(Type.Unknown()),
  containers: Type.Array(Type.String()),
  metadata: Type.Record(Type.String(), Type.String()),
  fingerprint: Type.Optional(Type.String()),
  fingerprint_expression: Type.Optional(Type.String()),
  search_indexes: Type.Array(Type.String()),
  expires_at: Type.Optional(DateTime),
  ...AuditFields,
})
export type TokenResponse = Static<typeof TokenResponse>

/** What an update answers a key that may update the token but not read it: its name, no metadata or settings it already had. */
export const UpdatedTokenName = Type.Object({ id: Type.String(), tenant_id: Uuid, type: TokenTypeSchema, modified_at: Type.Optional(DateTime) })
export type UpdatedTokenName = Static<typeof UpdatedTokenName>

export const TokenList = paginated(TokenResponse)

export const TokenCursorList = Type.Object({
  pagination: Type.Object({
    page_size: Type.Integer(),
    next: Type.Optional(Type.String({ description: 'Send as `start` for the next page; absent on the last page.' })),
  }),
  data: Type.Array(TokenResponse),
})

/** `/tokenize` and `/detokenize` take and return any JSON; expressions and tokens keep their places. */
export const AnyJson = Type.Unknown({ description: 'Any JSON value.' })
