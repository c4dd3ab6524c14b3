import { Type, type Static } from '@sinclair/typebox'
import { AuditFields, PageQuery, Uuid, paginated } from './common.js'

const Configuration = Type.Record(Type.String({ minLength: 1, maxLength: 200 }), Type.String({ maxLength: 10_000 }), { maxProperties: 100 })

/** `code` length is checked by the service against the configured limit (default 50,000). */
export const ReactorBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 200 }),
    code: Type.String({ minLength: 1 }),
    configuration: Type.Optional(Configuration),
    application: Type.Optional(Type.Union([Type.Object({ id: Uuid }, { additionalProperties: false }), Type.Null()])),
  },
  { additionalProperties: false },
)
export type ReactorBody = Static<typeof ReactorBody>

export const ReactBody = Type.Object({ args: Type.Optional(Type.Unknown()) }, { additionalProperties: false })

export const ListReactorsQuery = Type.Object({ ...PageQuery }, { additionalProperties: false })

export const ReactorResponse = Type.Object({
  id: Uuid,
  tenant_id: Uuid,
  name: Type.String(),
  code: Type.String(),
  configuration: Type.Record(Type.String(), Type.String()),
  application: Type.Optional(Type.Object({ id: Uuid })),
  ...AuditFields,
})
export type ReactorResponse = Static<typeof ReactorResponse>

export const ReactorList = paginated(ReactorResponse)

/** What the Reactor returned; `tokens` when it returned `{ tokenize }`. A CustomHttpResponseError answers with its own status, headers and body instead. */
export const ReactResult = Type.Object({
  raw: Type.Optional(Type.Unknown()),
  body: Type.Optional(Type.Unknown()),
  headers: Type.Optional(Type.Unknown()),
  tokens: Type.Optional(Type.Unknown()),
})
