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

export const SessionCreated = Type.Object({
  session_key: Type.String({ description: 'The key of the session (SVC-API-KEY), shown once.' }),
  nonce: Type.String({ description: 'Hand to a private Application to authorize the session.' }),
  expires_at: DateTime,
})
export type SessionCreated = Static<typeof SessionCreated>

export const SessionAuthorized = Type.Object({ expires_at: DateTime })
export type SessionAuthorized = Static<typeof SessionAuthorized>
