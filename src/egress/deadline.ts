import { discardBody } from './body.js'
import { destinationTimeoutError } from './forward-errors.js'
import type { ForwardResponse } from './forward-types.js'

/**
 * Holds a whole outbound call (connect, head and body) to `ms`. undici's and node's own
 * time-outs are per phase and count idle time, so a destination that sent a byte before each
 * idle time-out held the call, its socket and its caller for ever. Past the deadline a call
 * still without an answer fails with ETIMEDOUT (504), and an answer still streaming is destroyed
 * with it: the caller sees an aborted response, as when a destination resets mid-body.
 */
export function withinDeadline(call: Promise<ForwardResponse>, ms: number): Promise<ForwardResponse> {
  return new Promise((resolve, reject) => {
    let response: ForwardResponse | undefined
    let expired = false
    const timer = setTimeout(() => {
      expired = true
      if (response === undefined) reject(destinationTimeoutError())
      else response.body.destroy(destinationTimeoutError())
    }, ms)
    call.then(
      (res) => {
        // Too late: the caller was answered 504; the call itself still owns a socket to free.
        if (expired) return discardBody(res.body)
        response = res
        if (res.body.destroyed) clearTimeout(timer)
        else res.body.once('close', () => clearTimeout(timer))
        resolve(res)
      },
      (err: unknown) => {
        clearTimeout(timer)
        reject(err)
      },
    )
  })
}
