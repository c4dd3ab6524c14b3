import type { Knex } from 'knex'

/** Rows an expiry sweep deletes per statement: a backlog of millions goes in many short statements, each well within the statement time-out, where one statement for all never finished. */
export const EXPIRED_BATCH = 5000

/**
 * Deletes the rows of `table` that `expired` selects, `batch` of them per statement (by primary
 * key `key`), until a statement deletes fewer; yields each statement's `returning` columns. The
 * delete tests `expired` again: a row the select saw expired that was taken over meanwhile (a
 * new token in an expired one's id, a reclaimed idempotency key) stays. Shared by the sweeps of
 * every table with an expiry.
 */
export async function* deleteExpiredRows<R>(knex: Knex, table: string, key: string[], expired: (q: Knex.QueryBuilder) => void, returning: string[], batch: number): AsyncGenerator<R[]> {
  for (;;) {
    const rows = (await knex(table).whereIn(key, knex(table).select(key).where(expired).limit(batch)).where(expired).delete().returning(returning)) as R[]
    yield rows
    if (rows.length < batch) return
  }
}
