import { Type, type Static } from '@sinclair/typebox'
import { AuditFields, PageQuery, Uuid, paginated } from './common.js'

const Configuration = Type.Record(Type.String({ minLength: 1, maxLength: 200 }), Type.String({ maxLength: 10_000 }), { maxProperties: 100 })

/** `code` length is checked by the service against the configured limit (default 50,000). */
const Transform = Type.Object({ code: Type.String({ minLength: 1 }) }, { additionalProperties: false })

/** PUT replaces the whole proxy: a transform left out is removed. */
export const ProxyBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 200 }),
    destination_url: Type.String({ minLength: 1, maxLength: 2048 }),
    request_transform: Type.Optional(Transform),
    response_transform: Type.Optional(Transform),
    configuration: Type.Optional(Configuration),
    application: Type.Optional(Type.Union([Type.Object({ id: Uuid }, { additionalProperties: false }), Type.Null()])),
    require_auth: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
)
export type ProxyBody = Static<typeof ProxyBody>

export const ListProxiesQuery = Type.Object({ ...PageQuery }, { additionalProperties: false })

export const ProxyResponse = Type.Object({
  id: Uuid,
  key: Type.Optional(Type.String({ description: 'The proxy key (SVC-PROXY-KEY), only in the create answer.' })),
  tenant_id: Uuid,
  name: Type.String(),
  destination_url: Type.String(),
  request_transform: Type.Optional(Transform),
  response_transform: Type.Optional(Transform),
  configuration: Type.Record(Type.String(), Type.String()),
  application: Type.Optional(Type.Object({ id: Uuid })),
  require_auth: Type.Boolean(),
  ...AuditFields,
})
export type ProxyResponse = Static<typeof ProxyResponse>

export const ProxyList = paginated(ProxyResponse)
