#!/usr/bin/env node
import { runCli } from './program.js'

// Configuration is read from the environment by loadConfig, as for the server.
process.exitCode = await runCli(process.argv.slice(2), {
  out: (line) => process.stdout.write(`${line}\n`),
  note: (line) => process.stderr.write(`${line}\n`),
})
