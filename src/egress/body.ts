import type { Readable } from 'node:stream'
import { AppError, type ErrorCode } from '../errors/index.js'
import { toForwardError } from './forward-errors.js'
import type { ResponseHeaders } from './headers.js'

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
 * the call fails with `code` (413 payload_too_large unless said otherwise) and `detail`. A read
 * error is thrown as it came.
 */
export async function readBounded(body: Readable, limit: number, detail: string, code: ErrorCode = 'payload_too_large'): Promise<Buffer> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of body) {
    size += (chunk as Buffer).length
    if (size > limit) {
      discardBody(body)
      throw new AppError(code, { detail })
    }
    chunks.push(chunk as Buffer)
  }
  return Buffer.concat(chunks)
}

/** Answers up to this size, with a Content-Length, are read whole before they are relayed. */
export const BUFFERED_ANSWER_MAX_BYTES = 64 * 1024

/**
 * A destination's body, read into memory when it announces a Content-Length of at most
 * BUFFERED_ANSWER_MAX_BYTES: relaying it then costs one write instead of a pipe (the cheaper
 * path measured), and a destination that fails mid-body gets the caller a clean 502 instead of
 * an aborted answer. Larger, chunked or unannounced bodies stay streams, relayed as they come.
 */
export function bufferSmallBody(body: Readable, headers: ResponseHeaders): Readable | Promise<Buffer> {
  const length = headers['content-length']
  if (typeof length !== 'string' || !/^\d{1,5}$/.test(length) || Number(length) > BUFFERED_ANSWER_MAX_BYTES) return body
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = []
    body.on('data', (chunk: Buffer) => chunks.push(chunk))
    body.once('end', () => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)))
    body.once('error', (err) => reject(toForwardError(err)))
  })
}
