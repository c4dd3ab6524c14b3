// Lower or upper case, any version: ids are minted by randomUUID, but clients may echo them in capitals.
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/**
 * Whether an id from a request (a path segment, a body field, a CLI flag) can name a record.
 * One that cannot names nothing (a 404 or a field error); asked of Postgres it would be a
 * uuid input error, a 500.
 */
export function isUuid(id: string): boolean {
  return UUID.test(id)
}
