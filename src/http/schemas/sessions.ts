import { Type, type Static } from '@sinclair/typebox'
import { AccessRule, DateTime } from './common.js'

export const AuthorizeSessionBody = Type.Object(
  {
    nonce: Type.String({ minLength: 1, maxLength: 200 }),
    permissions: Type.Optional(Type.Array(Type.String({ maxLength: 100 }), { maxItems: 100, uniqueItems: true })),
    rules: Type.Optional(Type.Array(AccessRule, { maxItems: 100 })),
    expires_at: Type.Optional(DateTime),
  },
  { additionalProperties: false },
)
export type AuthorizeSessionBody = Static<typeof AuthorizeSessionBody>
