import { Type, type Static } from '@sinclair/typebox'

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
