import { Type, type TSchema } from '@sinclair/typebox'

/** A string enum whose ajv error lists the allowed values. */
export const StringEnum = <T extends string[]>(values: [...T], options: object = {}) =>
  Type.Unsafe<T[number]>({ type: 'string', enum: values, ...options })

export const Uuid = Type.String({ format: 'uuid' })

export const DateTime = Type.String({ format: 'date-time' })

/** Who made and last changed a resource, and when, as the presenters show them. */
export const AuditFields = {
  created_by: Type.Optional(Type.String()),
  created_at: Type.Optional(DateTime),
  modified_by: Type.Optional(Type.String()),
  modified_at: Type.Optional(DateTime),
}

export const PageQuery = {
  // Bounded so that `(page - 1) * size` is an offset every store takes; `1e400` is no page.
  page: Type.Integer({ minimum: 1, maximum: 2_147_483_647, default: 1 }),
  size: Type.Integer({ minimum: 1, maximum: 100, default: 20 }),
}

export const AccessRuleCondition = Type.Object(
  {
    attribute: StringEnum(['id', 'container']),
    operator: StringEnum(['starts_with', 'equals']),
    value: Type.String({ minLength: 1, maxLength: 400 }),
  },
  { additionalProperties: false },
)

export const AccessRule = Type.Object(
  {
    description: Type.Optional(Type.String({ maxLength: 1000 })),
    priority: Type.Integer({ minimum: 1 }),
    container: Type.Optional(Type.String({ maxLength: 400 })),
    conditions: Type.Optional(Type.Array(AccessRuleCondition, { maxItems: 50 })),
    transform: StringEnum(['redact', 'mask', 'reveal']),
    permissions: Type.Array(Type.String({ maxLength: 100 }), { minItems: 1, maxItems: 100 }),
  },
  { additionalProperties: false },
)

/** A paginated list response's schema, for docs. */
export const paginated = <T extends TSchema>(item: T) =>
  Type.Object({
    pagination: Type.Object({
      total_items: Type.Integer(),
      page_number: Type.Integer(),
      page_size: Type.Integer(),
      total_pages: Type.Integer(),
    }),
    data: Type.Array(item),
  })
