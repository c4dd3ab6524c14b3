import { readdirSync } from 'node:fs'
import { Command, CommanderError } from 'commander'
import { packageVersion } from '../version.js'
import { CliError, EXIT_FAILED, EXIT_USAGE, failureMessage } from './cli-error.js'
import type { CliCommand, CliContext } from './context.js'

/**
 * `tessera <command>`: the operator's tool. Every file in commands/ is one command, found at
 * start, so a new command (say `audit verify`) is one new file there.
 */
export async function runCli(argv: string[], context: CliContext): Promise<number> {
  const program = new Command('tessera')
    .description('Tessera operator commands; configuration comes from the same environment variables as the server')
    .version(packageVersion())
    .exitOverride()
    .showHelpAfterError()
    .configureOutput({ writeOut: (s) => context.out(s.trimEnd()), writeErr: (s) => context.note(s.trimEnd()) })
  // Commands made after these settings inherit them (exit override, output, help after errors).
  for (const command of await loadCommands()) command.register(program, context)
  try {
    await program.parseAsync(argv, { from: 'user' })
    return 0
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : EXIT_USAGE
    if (err instanceof CliError) {
      context.note(`tessera: ${err.message}`)
      return err.exitCode
    }
    context.note(`tessera: ${failureMessage(err)}`)
    return EXIT_FAILED
  }
}

async function loadCommands(): Promise<CliCommand[]> {
  const dir = new URL('./commands/', import.meta.url)
  const files = readdirSync(dir).filter((f) => /\.(js|ts)$/.test(f) && !f.endsWith('.d.ts')).sort()
  return Promise.all(files.map(async (f) => ((await import(new URL(f, dir).href)) as { command: CliCommand }).command))
}

