/** Starts the bench's own child servers (destination, baseline forwarder) and waits for their port. */
import type { ChildProcess } from 'node:child_process'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { captureOutput, spawnNode, stopChild } from './proc.js'
import { ROOT } from './tessera.js'

const HERE = path.dirname(fileURLToPath(import.meta.url))

export interface HelperProcess {
  url: string
  pid: number
  stop(): Promise<void>
}

/** `node --import tsx bench/lib/<name>.ts`, pinned to `core` when given. */
export async function startHelper(name: 'destination' | 'forwarder' | 'koa-forwarder', core?: number): Promise<HelperProcess> {
  const child: ChildProcess = spawnNode(['--import', 'tsx', path.join(HERE, `${name}.ts`)], { core, cwd: ROOT })
  const output = captureOutput(child)
  const port = await new Promise<number>((resolve, reject) => {
    let buffered = ''
    child.stdout!.on('data', (chunk: Buffer) => {
      buffered += chunk.toString()
      const match = /\{"port":(\d+)\}/.exec(buffered)
      if (match) resolve(Number(match[1]))
    })
    child.once('exit', (code) => reject(new Error(`${name} exited with ${code}:\n${output()}`)))
    setTimeout(() => reject(new Error(`${name} did not start in 30 s:\n${output()}`)), 30_000).unref()
  })
  return { url: `http://127.0.0.1:${port}`, pid: child.pid!, stop: () => stopChild(child) }
}
