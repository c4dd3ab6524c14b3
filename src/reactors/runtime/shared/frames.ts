/**
 * Framing of a lane: the byte stream between the API process and one worker thread of the
 * runtime (see protocol.ts). A frame is a small JSON header plus a body of UTF-8 text carried
 * as is: Reactor inputs, results and bridge arguments are JSON text already, and embedding them
 * in the header would escape them on one side and unescape them on the other.
 *
 *   u32 LE header bytes | u32 LE body bytes | header (JSON, UTF-8) | body (UTF-8)
 *
 * Used on both sides of the boundary; no isolated-vm here.
 */
const PREFIX = 8

export function encodeFrame(header: object, body = ''): Buffer {
  const head = JSON.stringify(header)
  const headBytes = Buffer.byteLength(head)
  const bodyBytes = body === '' ? 0 : Buffer.byteLength(body)
  const frame = Buffer.allocUnsafe(PREFIX + headBytes + bodyBytes)
  frame.writeUInt32LE(headBytes, 0)
  frame.writeUInt32LE(bodyBytes, 4)
  frame.write(head, PREFIX, 'utf8')
  if (bodyBytes > 0) frame.write(body, PREFIX + headBytes, 'utf8')
  return frame
}

/** What `writeCoalesced` needs of a socket. */
export interface CorkableStream {
  write(chunk: Buffer): boolean
  cork(): void
  uncork(): void
}

const corked = new WeakSet<CorkableStream>()

/**
 * Writes a frame, coalescing every frame written to the same stream in this turn of the event
 * loop into one write: cork, and uncork in the turn's check phase (`setImmediate`), after all
 * the I/O callbacks the turn runs. Under load many invocations, answers and bridge calls then
 * share one system call and one wake-up of the other process (on a shared core, a switch
 * between the two). Uncorking on the next tick instead coalesced only the frames of one I/O
 * callback: with a request transform at 32 connections, Tessera and its runtime on one core,
 * 1,622–1,707 req/s at 578–614 CPU µs per request against 2,182–2,267 at 435–452 this way
 * (three alternated pairs, see bench/DIAGNOSIS.md).
 */
export function writeCoalesced(stream: CorkableStream, frame: Buffer): void {
  if (!corked.has(stream)) {
    corked.add(stream)
    stream.cork()
    setImmediate(() => {
      corked.delete(stream)
      stream.uncork()
    })
  }
  stream.write(frame)
}

export class FrameError extends Error {
  override readonly name = 'FrameError'
}

/**
 * Reassembles frames from stream chunks in any split. A frame announcing more than `maxBytes`
 * throws FrameError: the stream is corrupt or the other side broken, and the lane must go.
 * Unless `onOversized` is given: then such a frame's header (if it fits the bound itself) goes
 * there, its body is skipped as it streams by (never buffered), and the next frame is read as
 * usual, so one frame too large for this side fails one call, not the lane.
 */
export class FrameReader {
  private pending: Buffer[] = []
  private pendingBytes = 0
  /** Body bytes of an oversized frame still to skip. */
  private skipping = 0

  constructor(
    private readonly onFrame: (header: unknown, body: string) => void,
    private readonly maxBytes: number,
    private readonly onOversized?: (header: unknown) => void,
  ) {}

  push(chunk: Buffer): void {
    let data = chunk
    if (this.skipping > 0) {
      const skipped = Math.min(this.skipping, data.length)
      this.skipping -= skipped
      data = data.subarray(skipped)
      if (data.length === 0) return
    }
    if (this.pendingBytes > 0) {
      this.pending.push(data)
      this.pendingBytes += data.length
      if (this.pendingBytes < this.needed()) return
      data = Buffer.concat(this.pending, this.pendingBytes)
      this.pending = []
      this.pendingBytes = 0
    }
    let offset = 0
    while (data.length - offset >= PREFIX) {
      const headBytes = data.readUInt32LE(offset)
      const bodyBytes = data.readUInt32LE(offset + 4)
      const size = PREFIX + headBytes + bodyBytes
      const headStart = offset + PREFIX
      if (size > this.maxBytes) {
        this.refuse(size, headBytes)
        if (data.length < headStart + headBytes) break
        const header: unknown = JSON.parse(data.toString('utf8', headStart, headStart + headBytes))
        const available = data.length - headStart - headBytes
        // State first: the callback may write, and a later chunk must find the skip in place.
        this.skipping = Math.max(0, bodyBytes - available)
        offset = Math.min(data.length, offset + size)
        this.onOversized?.(header)
        continue
      }
      if (data.length - offset < size) break
      const header: unknown = JSON.parse(data.toString('utf8', headStart, headStart + headBytes))
      const body = bodyBytes === 0 ? '' : data.toString('utf8', headStart + headBytes, offset + size)
      offset += size
      this.onFrame(header, body)
    }
    if (offset < data.length) {
      this.pending = [data.subarray(offset)]
      this.pendingBytes = data.length - offset
    }
  }

  /** A frame over the bound: FrameError, unless it is to be skipped and its header fits. */
  private refuse(size: number, headBytes: number): void {
    if (this.onOversized === undefined || PREFIX + headBytes > this.maxBytes) throw new FrameError(`lane frame of ${size} bytes exceeds ${this.maxBytes}`)
  }

  /**
   * Bytes the first pending frame needs in all (its prefix until that is complete; of a frame
   * over the bound, its prefix and header, or FrameError).
   */
  private needed(): number {
    if (this.pendingBytes < PREFIX) return PREFIX
    const prefix = Buffer.allocUnsafe(PREFIX)
    let filled = 0
    for (const chunk of this.pending) {
      filled += chunk.copy(prefix, filled, 0, Math.min(chunk.length, PREFIX - filled))
      if (filled === PREFIX) break
    }
    const headBytes = prefix.readUInt32LE(0)
    const size = PREFIX + headBytes + prefix.readUInt32LE(4)
    if (size <= this.maxBytes) return size
    this.refuse(size, headBytes)
    return PREFIX + headBytes
  }
}
