import type { Knex } from 'knex'

/** Small key/value facts about the installation (e.g. the master-key check value). */
export function metaRepository(knex: Knex) {
  return {
    async get(key: string): Promise<string | undefined> {
      const row = await knex<{ key: string; value: string }>('meta').where({ key }).first()
      return row?.value
    },
    async set(key: string, value: string, trx: Knex = knex): Promise<void> {
      await trx('meta').insert({ key, value }).onConflict('key').merge()
    },
  }
}

export type MetaRepository = ReturnType<typeof metaRepository>
