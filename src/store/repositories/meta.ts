import type { Knex } from 'knex'

/** Small key/value facts about the installation (e.g. the master-key check value). */
export function metaRepository(knex: Knex) {
  const get = async (key: string, trx: Knex = knex): Promise<string | undefined> => {
    const row = await trx<{ key: string; value: string }>('meta').where({ key }).first()
    return row?.value
  }
  return {
    get,
    async set(key: string, value: string, trx: Knex = knex): Promise<void> {
      await trx('meta').insert({ key, value }).onConflict('key').merge()
    },
    /**
     * Stores `value` unless the key holds one already, and answers what is stored. Processes
     * starting together on a new database thus all use the first one's value, never their own.
     */
    async setIfAbsent(key: string, value: string, trx: Knex = knex): Promise<string> {
      await trx('meta').insert({ key, value }).onConflict('key').ignore()
      const stored = await get(key, trx)
      if (stored === undefined) throw new Error(`meta ${key} is missing right after it was stored`)
      return stored
    },
    /**
     * Adds the entries of `entries` the JSON object stored at `key` lacks, in one statement (no
     * read-modify-write another process could interleave with), keeping every entry already
     * stored; answers the object as stored afterwards.
     */
    async addMissingEntries(key: string, entries: Record<string, string>, trx: Knex = knex): Promise<Record<string, string>> {
      await trx.raw(
        `insert into meta (key, value) values (?, ?)
         on conflict (key) do update set value = (excluded.value::jsonb || meta.value::jsonb)::text`,
        [key, JSON.stringify(entries)],
      )
      const stored = await get(key, trx)
      return stored === undefined ? {} : (JSON.parse(stored) as Record<string, string>)
    },
  }
}

export type MetaRepository = ReturnType<typeof metaRepository>
