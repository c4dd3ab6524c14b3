#!/usr/bin/env node
import { runCli } from './program.js'

/**
 * A reader that goes away early (`tessera config | head -1`) is no failure: writing to it stops,
 * the command finishes and closes its store as usual. Any other stream error still throws.
 */
function writer(stream: NodeJS.WriteStream): (line: string) => void {
  let open = true
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') throw err
    open = false
  })
  return (line) => void (open && stream.write(`${line}\n`))
}

// Configuration is read from the environment by loadConfig, as for the server.
process.exitCode = await runCli(process.argv.slice(2), { out: writer(process.stdout), note: writer(process.stderr) })
