import { describeConfig } from '../../config/index.js'
import { cliConfig, type CliCommand } from '../context.js'

export const command: CliCommand = {
  register(program, context) {
    program
      .command('config')
      .description('print the effective configuration (defaults applied), secrets hidden')
      .option('--json', 'print JSON instead of one line per setting')
      .action((options: { json?: boolean }) => {
        const described = describeConfig(cliConfig(context))
        if (options.json) return context.out(JSON.stringify(described, null, 2))
        for (const [name, value] of Object.entries(described)) context.out(`${name}: ${typeof value === 'object' ? JSON.stringify(value) : String(value)}`)
      })
  },
}
