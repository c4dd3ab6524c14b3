import { migrationStatus, runMigrations } from '../../store/index.js'
import { cliConfig, type CliCommand } from '../context.js'

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
          return
        }
        const ran = await runMigrations(config)
        for (const name of ran) context.out(`applied  ${name}`)
        context.out(ran.length === 0 ? 'the schema is up to date' : `${ran.length} migration(s) applied`)
      })
  },
}
