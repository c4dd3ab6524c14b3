import type { Knex } from 'knex'

export interface Page<T> {
  items: T[]
  total: number
}

/** One page of what `base` selects, in creation order (ties by id, so pages never overlap), and how many rows it selects in all. */
export async function pageOf<T>(base: Knex.QueryBuilder, page: number, size: number): Promise<Page<T>> {
  const [countRow, items] = await Promise.all([
    base.clone().count<{ count: number }[]>({ count: '*' }).first(),
    base.clone().orderBy([{ column: 'created_at' }, { column: 'id' }]).limit(size).offset((page - 1) * size),
  ])
  return { items: items as T[], total: Number(countRow?.count ?? 0) }
}
