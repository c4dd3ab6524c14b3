import { applicationPrincipal } from '../../auth/application-lookup.js'
import { saverRefusal } from '../../auth/saver-refusal.js'
import type { Config } from '../../config/index.js'
import { eachSavedCodePage, migrationStatus, runMigrations, type SavedCode } from '../../store/index.js'
import { cliConfig, type CliCommand, type CliContext } from '../context.js'

export const command: CliCommand = {
  register(program, context) {
    program
      .command('migrate')
      .description('bring the database schema up to date (the server also does this when it starts)')
      .option('--list', 'list applied and pending migrations without running any (creates nothing)')
      .action(async (options: { list?: boolean }) => {
        const config = cliConfig(context)
        if (options.list) {
          const status = await migrationStatus(config)
          for (const name of status.completed) context.out(status.unknown.includes(name) ? `applied  ${name}  (unknown to this version: migrated by a newer Tessera)` : `applied  ${name}`)
          for (const name of status.pending) context.out(`pending  ${name}`)
        } else {
          const ran = await runMigrations(config)
          for (const name of ran) context.out(`applied  ${name}`)
          context.out(ran.length === 0 ? 'the schema is up to date' : `${ran.length} migration(s) applied`)
        }
        await reportRefusedTokens(config, context)
      })
  },
}

/**
 * The Reactors and proxies whose saver lets no caller's token through: an upgrade that starts
 * bounding them by their saver stops them quietly otherwise (README "On upgrade").
 */
async function reportRefusedTokens(config: Config, context: CliContext): Promise<void> {
  const now = Date.now()
  let refused = 0
  await eachSavedCodePage(config, (page) => {
    for (const code of page) {
      const why = saverRefusal(code.saver && applicationPrincipal(code.saver), now)
      if (why === undefined) continue
      refused++
      context.out(refusalLine(code, why))
    }
  })
  if (refused > 0) {
    context.out(`${refused} refuse callers' tokens: give each saver token:use, or save it again with a key that holds it (README, "On upgrade")`)
  }
}

// The name as JSON: quoted, and a name with a line break cannot pass for another line.
const refusalLine = (code: SavedCode, why: string) =>
  `refuses callers' tokens  ${code.kind} ${code.id} ${JSON.stringify(code.name)}  tenant ${code.tenant_id}  saver ${code.saver_id} (${why})`
