import type { Readable } from 'node:stream'
import { AppError } from '../errors/index.js'

const noop = (): void => {}

/**
 * Drops a destination body nobody will read. An unread undici body destroyed by us emits
 * RequestAbortedError, and an 'error' nobody listens for takes the whole process down.
 */
export function discardBody(body: Readable): void {
  body.on('error', noop)
  body.destroy()
}

/**
 * Reads a destination body into memory, at most `limit` bytes: past it the body is discarded and
 * the call fails with 413 payload_too_large and `detail`. A read error is thrown as it came.
 */
export async function readBounded(body: Readable, limit: number, detail: string): Promise<Buffer> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of body) {
    size += (chunk as Buffer).length
    if (size > limit) {
      discardBody(body)
      throw new AppError('payload_too_large', { detail })
    }
    chunks.push(chunk as Buffer)
  }
  return Buffer.concat(chunks)
}
