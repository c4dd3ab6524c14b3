import { Type, type Static } from '@sinclair/typebox'
import { TOKEN_TYPE_NAMES } from '../../vault/types/index.js'
import { DateTime, PageQuery, StringEnum } from './common.js'

export const TokenTypeSchema = StringEnum([...TOKEN_TYPE_NAMES])

const Containers = Type.Array(Type.String({ maxLength: 400 }), { minItems: 1, maxItems: 10, uniqueItems: true })
const Metadata = Type.Record(Type.String({ minLength: 1, maxLength: 100 }), Type.String({ maxLength: 500 }), { maxProperties: 20 })
const SearchIndexes = Type.Array(Type.String({ minLength: 1, maxLength: 500 }), { maxItems: 20 })
const Expression = Type.String({ minLength: 1, maxLength: 500 })

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
    deduplicate_token: Type.Optional(Type.Boolean()),
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
    metadata: Type.Optional(Type.Union([Type.Record(Type.String({ minLength: 1, maxLength: 100 }), Type.Union([Type.String({ maxLength: 500 }), Type.Null()])), Type.Null()])),
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
