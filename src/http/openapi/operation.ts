import type { TObject, TSchema } from '@sinclair/typebox'

export type Method = 'get' | 'post' | 'put' | 'patch' | 'delete'

export interface ResponseDoc {
  description: string
  /** The answer's schema (JSON); none: no body. */
  schema?: TSchema
  /** Default `application/json` (`text/html` for a schema described as such). */
  contentType?: string
  headers?: Record<string, { description: string; schema: TSchema }>
}

/**
 * One operation as the API description shows it. Schemas are the very objects the routes
 * validate with and the presenters' return types, so the description cannot drift from them.
 */
export interface OperationDoc {
  method: Method
  /** OpenAPI form: `/applications/{id}`. */
  path: string
  summary: string
  description?: string
  tag: string
  /** The permission the key must hold; undefined with `auth` false: no key at all. */
  permission?: string
  /** Default true: SVC-API-KEY required. */
  auth?: boolean
  params?: Record<string, TSchema>
  query?: TObject
  /** Extra request headers, beside SVC-API-KEY and SVC-IDEMPOTENCY-KEY. */
  headers?: Record<string, { description: string; required?: boolean }>
  body?: TSchema
  bodyContentTypes?: string[]
  bodyRequired?: boolean
  responses: Partial<Record<number | 'default', ResponseDoc>>
  /** Failure statuses besides the ones derived from the operation (auth, validation, limits). */
  errors?: number[]
  /** Errors render as `{ proxy_error }` (the proxy). */
  proxyErrors?: boolean
}

export const op = (doc: OperationDoc): OperationDoc => doc
