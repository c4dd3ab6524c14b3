import { Type, type Static } from '@sinclair/typebox'
import { AccessRule, DateTime, PageQuery, StringEnum, Uuid, paginated } from './common.js'

export const ApplicationTypeSchema = StringEnum(['private', 'public', 'management'])

const Name = Type.String({ minLength: 1, maxLength: 200 })
const Permissions = Type.Array(Type.String({ maxLength: 100 }), { maxItems: 100, uniqueItems: true })
const Rules = Type.Array(AccessRule, { maxItems: 100 })

export const CreateApplicationBody = Type.Object(
  {
    name: Name,
    type: ApplicationTypeSchema,
    permissions: Type.Optional(Permissions),
    rules: Type.Optional(Rules),
    expires_at: Type.Optional(Type.Union([DateTime, Type.Null()])),
  },
  { additionalProperties: false },
)
export type CreateApplicationBody = Static<typeof CreateApplicationBody>

export const UpdateApplicationBody = Type.Object(
  {
    name: Name,
    permissions: Type.Optional(Permissions),
    rules: Type.Optional(Rules),
  },
  { additionalProperties: false },
)
export type UpdateApplicationBody = Static<typeof UpdateApplicationBody>

export const ListApplicationsQuery = Type.Object(
  {
    id: Type.Array(Uuid, { default: [], maxItems: 100 }),
    type: Type.Array(ApplicationTypeSchema, { default: [] }),
    ...PageQuery,
  },
  { additionalProperties: false },
)
export type ListApplicationsQuery = Static<typeof ListApplicationsQuery>

export const ApplicationResponse = Type.Object({
  id: Uuid,
  tenant_id: Uuid,
  name: Type.String(),
  key: Type.Optional(Type.String()),
  type: ApplicationTypeSchema,
  permissions: Type.Array(Type.String()),
  rules: Type.Array(AccessRule),
  created_by: Type.Optional(Uuid),
  created_at: DateTime,
  modified_by: Type.Optional(Uuid),
  modified_at: DateTime,
  expires_at: Type.Optional(DateTime),
})
export type ApplicationResponse = Static<typeof ApplicationResponse>

export const ApplicationList = paginated(ApplicationResponse)
