import type { Knex } from 'knex'
import type { ApplicationRecord } from './applications.js'

/** A Reactor or pre-configured proxy with its saver: callers' tokens are detokenized within the saver's current grants. */
export interface SavedCode {
  kind: 'reactor' | 'proxy'
  id: string
  tenant_id: string
  name: string
  saver_id: string
  /** As it is now; undefined when it is gone (a saver is looked up in the row's own tenant, as at each call). */
  saver: ApplicationRecord | undefined
}

export interface SavedCodeOptions {
  /**
   * Before 20261130000000_code_savers has run: also the rows it will give a saver (their
   * `modified_by`, where that Application exists and has not expired, as the migration decides),
   * so that an operator sees before upgrading what will stop.
   */
  predict: boolean
  pageSize?: number
}

const TABLES = { reactor: 'reactors', proxy: 'proxies' } as const

/** A deployment may hold many thousands of Reactors: they are read this many at a time. */
const PAGE_SIZE = 500

interface SavedRow {
  id: string
  tenant_id: string
  name: string
  saver_id: string
}

export function savedCodeRepository(knex: Knex) {
  function rows(table: string, predict: boolean, after: string | undefined, size: number): Promise<SavedRow[]> {
    const active = knex('applications').select('id').where((q) => q.whereNull('expires_at').orWhere('expires_at', '>', knex.fn.now()))
    const query = knex(table)
      .select('id', 'tenant_id', 'name', knex.raw('coalesce(bound_by, modified_by) as saver_id'))
      .where((q) => {
        void q.whereNotNull('bound_by')
        if (predict) void q.orWhereIn('modified_by', active)
      })
      .orderBy('id')
      .limit(size)
    if (after !== undefined) void query.andWhere('id', '>', after)
    return query
  }

  async function withSavers(kind: SavedCode['kind'], page: SavedRow[]): Promise<SavedCode[]> {
    const ids = [...new Set(page.map((row) => row.saver_id))]
    const apps: ApplicationRecord[] = ids.length ? await knex<ApplicationRecord>('applications').whereIn('id', ids) : []
    const byTenant = new Map(apps.map((app) => [`${app.tenant_id}:${app.id}`, app]))
    return page.map((row) => ({ kind, ...row, saver: byTenant.get(`${row.tenant_id}:${row.saver_id}`) }))
  }

  return {
    /** Whether savers are recorded at all (`bound_by`, from 20261129000200_code_binders on); before, nothing is bounded. */
    async recorded(): Promise<boolean> {
      for (const table of Object.values(TABLES)) if (!(await knex.schema.hasColumn(table, 'bound_by'))) return false
      return true
    },
    /** Every Reactor and proxy with a saver, across tenants, a page at a time (by id, so a page never repeats another). */
    async *pages(options: SavedCodeOptions): AsyncGenerator<SavedCode[]> {
      const size = options.pageSize ?? PAGE_SIZE
      for (const [kind, table] of Object.entries(TABLES) as [SavedCode['kind'], string][]) {
        let after: string | undefined
        for (;;) {
          const page = await rows(table, options.predict, after, size)
          if (page.length > 0) yield await withSavers(kind, page)
          if (page.length < size) break
          after = page.at(-1)!.id
        }
      }
    },
  }
}

export type SavedCodeRepository = ReturnType<typeof savedCodeRepository>
