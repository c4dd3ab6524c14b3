import type { IncomingMessage } from 'node:http'
import { AppError } from '../errors/index.js'
import type { BodyBudget, BodyCharge } from './body-budget.js'

export interface BodyReadOptions {
  limitBytes: number
  budget: BodyBudget
  /**
   * What must settle before a body read whole gives its bytes back; unset, they go back once it
   * is read. /proxy gives the end of its handler: the body is held while the destination takes
   * its time, but not while a caller that stopped reading takes the answer.
   */
  heldUntil?: Promise<unknown>
}

/**
 * The request body, at most `limitBytes` (413), charged to `budget` as it arrives (503 past it).
 * Whatever ends the request (read, aborted, errored, timed out) gives the bytes back.
 */
export async function readRequestBody(req: IncomingMessage, options: BodyReadOptions): Promise<Buffer> {
  const declared = declaredLength(req)
  if (declared !== undefined && declared > options.limitBytes) throw tooLarge(options.limitBytes)
  if (!req.readable) throw unreadable(undefined)
  const charge = options.budget.open(declared ?? 0)
  let body: Buffer
  try {
    body = await collect(req, options.limitBytes, declared, charge)
  } catch (err) {
    charge.release()
    throw err
  }
  const release = () => charge.release()
  if (options.heldUntil === undefined) release()
  else void options.heldUntil.then(release, release)
  return body
}

function collect(req: IncomingMessage, limitBytes: number, declared: number | undefined, charge: BodyCharge): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let received = 0
    const settle = (err: unknown, body?: Buffer) => {
      req.off('data', onData).off('end', onEnd).off('error', onFail).off('aborted', onFail).off('close', onFail)
      if (err === undefined) return resolve(body!)
      // Left paused: Node drops or closes what the caller still sends once the answer is out.
      req.unpipe()
      req.pause()
      reject(err)
    }
    const onData = (chunk: Buffer) => {
      received += chunk.length
      if (received > limitBytes) return settle(tooLarge(limitBytes))
      try {
        charge.add(chunk.length)
      } catch (err) {
        return settle(err)
      }
      chunks.push(chunk)
    }
    const onEnd = () => settle(declared !== undefined && received !== declared ? unreadable(undefined) : undefined, Buffer.concat(chunks))
    const onFail = (cause?: unknown) => settle(unreadable(cause))
    req.on('data', onData).once('end', onEnd).once('error', onFail).once('aborted', onFail).once('close', onFail)
  })
}

function declaredLength(req: IncomingMessage): number | undefined {
  const length = req.headers['content-length']
  // Node refuses a Content-Length that is not digits, and one beside Transfer-Encoding is ignored.
  return length === undefined || req.headers['transfer-encoding'] !== undefined ? undefined : Number(length)
}

const tooLarge = (limitBytes: number) => new AppError('payload_too_large', { detail: `The body exceeds ${limitBytes} bytes.` })
const unreadable = (cause: unknown) => new AppError('bad_request', { detail: 'The request body could not be read.', cause })
