import { readlinkSync } from 'node:fs'
import { getPriority, setPriority } from 'node:os'

/**
 * Nice value of the worker threads, and so of isolated-vm's threads (which they start): the
 * threads that create contexts and run Reactor code. Everything else, the API process and the
 * runtime child's main thread that relays answers, stays at the default 0. On a busy core the
 * scheduler then lets the API's own routes and the answer of a call that has ended go first:
 * a Reactor spinning in `while(true){}` until its deadline, or a warm isolate preparing its
 * next context, only takes the CPU they leave.
 */
export const ISOLATE_THREAD_NICE = 10

/**
 * Lowers the calling thread's priority to `nice` (never raises it). Linux keeps a nice value
 * per thread, and threads started afterwards inherit their creator's. Elsewhere (no
 * /proc/thread-self) this does nothing and answers false.
 */
export function lowerThreadPriority(nice: number): boolean {
  let tid: number
  try {
    tid = Number(readlinkSync('/proc/thread-self').split('/').pop())
  } catch {
    return false
  }
  if (!Number.isInteger(tid) || tid <= 0) return false
  try {
    if (getPriority(tid) < nice) setPriority(tid, nice)
    return true
  } catch {
    return false
  }
}
