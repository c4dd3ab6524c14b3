import { existsSync } from 'node:fs'
import path from 'node:path'
import type { Knex } from 'knex'
import type { Config } from '../config/index.js'
import { openPglite, openPostgres, pgliteDir, type OpenDatabaseOptions } from './database.js'
import { savedCodeRepository, type SavedCode } from './repositories/saved-code.js'

/** The migration that gives every Reactor and proxy its saver (from `modified_by`). */
const SAVERS_FILLED = '20261130000000_code_savers'

/**
 * `tessera migrate`, `--list` too: calls `visit` with each page of the Reactors and proxies that
 * have a saver, as the database is. Like the migration list it reads only: it never migrates nor
 * creates a database, and does not refuse one that is behind (where the savers' migration is still
 * to run, it shows the savers that migration will give). No database there, or one from before
 * savers were recorded: nothing.
 */
export async function eachSavedCodePage(config: Config, visit: (page: SavedCode[]) => void | Promise<void>, options: OpenDatabaseOptions = {}): Promise<void> {
  if (!config.databaseUrl && !options.inMemory && !existsSync(path.join(pgliteDir(config), 'PG_VERSION'))) return
  const db = config.databaseUrl ? openPostgres(config, config.databaseUrl, options) : await openPglite(config, options, false)
  try {
    const saved = savedCodeRepository(db.knex)
    if (!(await saved.recorded())) return
    const predict = !(await applied(db.knex, SAVERS_FILLED))
    for await (const page of saved.pages({ predict })) await visit(page)
  } finally {
    await db.close()
  }
}

async function applied(knex: Knex, migration: string): Promise<boolean> {
  return (await knex('knex_migrations').where({ name: migration }).first()) !== undefined
}
