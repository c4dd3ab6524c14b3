import { randomBytes } from 'node:crypto'
import { runCli } from '../../src/cli/program.js'

/** `tessera <argv>` in process, with `env` as its whole environment: exit code, stdout and stderr lines joined. */
export async function cli(env: Record<string, string>, ...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = []
  const err: string[] = []
  const code = await runCli(argv, { env, out: (l) => void out.push(l), note: (l) => void err.push(l) })
  return { code, out: out.join('\n'), err: err.join('\n') }
}

/** One master key of a keyring (`SVC_MASTER_KEY`): `<id>:<32 random bytes, base64>`. */
export const masterKey = (id: string) => `${id}:${randomBytes(32).toString('base64')}`
