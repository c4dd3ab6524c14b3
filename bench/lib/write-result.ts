import { mkdir, writeFile } from 'node:fs/promises'
import { dirname } from 'node:path'

/** Writes a bench's JSON result: to `outFile`, to `fallback` when it is undefined, nowhere when null. */
export async function writeResult(outFile: string | null | undefined, fallback: string, result: unknown): Promise<void> {
  const target = outFile === undefined ? fallback : outFile
  if (!target) return
  await mkdir(dirname(target), { recursive: true })
  await writeFile(target, JSON.stringify(result, null, 2) + '\n')
}
