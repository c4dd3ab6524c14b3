import { Type, type Static } from '@sinclair/typebox'
import { ApplicationResponse, ApplicationTypeSchema } from './applications.js'
import { DateTime, Uuid } from './common.js'

export const CreateTenantBody = Type.Object(
  { name: Type.String({ minLength: 1, maxLength: 200, pattern: '^[^\\u0000-\\u001f]+$' }) },
  { additionalProperties: false },
)
export type CreateTenantBody = Static<typeof CreateTenantBody>

export const UpdateTenantBody = Type.Object(
  {
    settings: Type.Object({ ephemeral_proxy_enabled: Type.Optional(Type.Boolean()) }, { additionalProperties: false }),
  },
  { additionalProperties: false },
)
export type UpdateTenantBody = Static<typeof UpdateTenantBody>

export const PermissionsQuery = Type.Object(
  { application_type: Type.Optional(Type.Unsafe<'private' | 'public' | 'management'>({ type: 'string', enum: ['private', 'public', 'management'] })) },
  { additionalProperties: false },
)

export const TenantResponse = Type.Object({
  id: Uuid,
  name: Type.String(),
  settings: Type.Object({ ephemeral_proxy_enabled: Type.Boolean() }),
  created_at: Type.Optional(DateTime),
  modified_at: Type.Optional(DateTime),
})
export type TenantResponse = Static<typeof TenantResponse>

export const CreateTenantResponse = Type.Object({ tenant: TenantResponse, application: ApplicationResponse })

export const PermissionList = Type.Array(
  Type.Object({ type: Type.String(), description: Type.String(), application_types: Type.Array(ApplicationTypeSchema) }),
)
