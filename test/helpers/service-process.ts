import { spawn, type ChildProcess } from 'node:child_process'

export interface ServiceProcess {
  base: string
  child: ChildProcess
  /** Everything the process wrote to stdout so far (pino lines). */
  output(): string
  /** Resolves with the exit code and the time (ms since epoch) the exit was seen. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>
}

/**
 * Runs `src/main.ts` as a real process (as `npm start` does, from source), killed with the test.
 * `detached`: it leads a process group of its own (with its Reactor runtime), as under a shell's
 * Ctrl-C or systemd, which signal the whole group.
 */
export async function spawnService(t: { teardown(fn: () => unknown): void }, env: Record<string, string>, options: { detached?: boolean } = {}): Promise<ServiceProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    env: { PATH: process.env.PATH ?? '', PORT: '0', SVC_PROXY_ALLOW_HTTP: 'true', SVC_PROXY_ALLOW_PRIVATE: 'true', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: options.detached === true,
  })
  t.teardown(() => child.kill('SIGKILL'))
  let out = ''
  let err = ''
  child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()))
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal, at: Date.now() })))
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString()
      const m = /"port":(\d+)/.exec(out)
      if (m) resolve(Number(m[1]))
    })
    void exited.then(() => reject(new Error(`exited early: ${out} ${err}`)))
  })
  return { base: `http://127.0.0.1:${port}`, child, output: () => out, exited }
}
