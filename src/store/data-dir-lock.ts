import { readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import lockfile from 'proper-lockfile'
import type { Logger } from 'pino'

/** A lock whose mtime is older than this is a dead process's, and the next opener takes it over. */
const STALE_MS = 10_000
/** Refreshed often, so a long PGlite query (it runs on our event loop) stays far inside STALE_MS. */
const UPDATE_MS = 1_000
const RETRY_MS = 500

/** Who holds the lock, written beside it: proper-lockfile's lock (a directory) must stay empty. */
interface Owner {
  pid: number
  host: string
}

/** Another process has the PGlite data directory open: opening it too would lose acknowledged writes. */
export class DataDirInUseError extends Error {
  constructor(dir: string, owner: Owner | undefined) {
    const who = owner ? ` (pid ${owner.pid}${owner.host === os.hostname() ? '' : ` on ${owner.host}`})` : ''
    super(`another Tessera process${who} holds the data directory ${dir}; the embedded PGlite allows one process at a time: stop it first`)
    this.name = 'DataDirInUseError'
  }
}

/**
 * Makes this process the only opener of `dir` until the returned function releases it. PGlite
 * is single-process: two on the same files each keep their own view and lose the other's
 * writes. A holder that is alive makes a second opener fail at once; a crash (`kill -9`) leaves
 * the lock behind, and then the opener waits until it goes stale. A live holder's lock can look
 * stale too (PGlite's first start holds its event loop for 10-20 s, so the refresh comes late):
 * its owner file is asked first, and a lock whose owner lives is never taken over.
 */
export async function lockDataDir(dir: string, logger?: Logger): Promise<() => Promise<void>> {
  const real = realpathSync(dir)
  const ownerFile = `${real}.owner`
  const options = {
    realpath: false,
    stale: STALE_MS,
    update: UPDATE_MS,
    // proper-lockfile's default throws from a timer, ending the process. Its usual cause here is a
    // refresh that came late (a long PGlite query holds the event loop), not a second owner: an
    // opener that finds this process alive fails at once instead of taking a stale lock over.
    onCompromised: (err: Error) => {
      const owner = readOwner(ownerFile)
      if (owner === undefined || owner.pid === process.pid) {
        // Still ours: proper-lockfile stops refreshing a compromised lock, so take it again, or
        // it would stay stale (and only the owner file would keep other openers out) for good.
        logger?.warn({ err, dir: real }, 'the lock on the data directory was refreshed late; taking it again')
        return void relock()
      }
      takenOver(err, owner)
    },
  }
  // Another process (one on another host cannot be asked whether we live) took it over and
  // writes to the same files: every write either of us makes from now on may be lost.
  const takenOver = (err: unknown, owner: Owner | undefined): never => {
    logger?.fatal({ err, dir: real, owner }, 'another process took over the data directory; stopping to keep its writes')
    process.exit(1)
  }
  let released = false
  const relock = () =>
    lockfile.lock(real, options).then(
      (again) => (released ? void again().catch(() => undefined) : void (release = again)),
      (err: unknown) => {
        // Someone holds it now (its owner file may not be written yet).
        if ((err as { code?: unknown }).code === 'ELOCKED') takenOver(err, readOwner(ownerFile))
        logger?.error({ err, dir: real }, 'the lock on the data directory could not be taken again')
      },
    )
  const current = readOwner(ownerFile)
  if (current && isAlive(current)) throw new DataDirInUseError(real, current)
  let release: () => Promise<void>
  try {
    release = await lockfile.lock(real, options)
  } catch (err) {
    if ((err as { code?: unknown }).code !== 'ELOCKED') throw err
    const owner = readOwner(ownerFile)
    if (owner && isAlive(owner)) throw new DataDirInUseError(real, owner)
    logger?.warn({ dir: real, owner }, 'the data directory is locked by a process that seems gone: waiting for its lock to go stale')
    const retries = { retries: Math.ceil(STALE_MS / RETRY_MS) + 4, factor: 1, minTimeout: RETRY_MS, maxTimeout: RETRY_MS }
    release = await lockfile.lock(real, { ...options, retries }).catch((again: unknown) => {
      throw (again as { code?: unknown }).code === 'ELOCKED' ? new DataDirInUseError(real, readOwner(ownerFile)) : again
    })
  }
  writeFileSync(ownerFile, JSON.stringify({ pid: process.pid, host: os.hostname() } satisfies Owner))
  return async () => {
    released = true
    rmSync(ownerFile, { force: true })
    // Already released when it was compromised (logged then).
    await release().catch(() => undefined)
  }
}

function readOwner(file: string): Owner | undefined {
  try {
    const owner = JSON.parse(readFileSync(file, 'utf8')) as Partial<Owner>
    return typeof owner.pid === 'number' && typeof owner.host === 'string' ? { pid: owner.pid, host: owner.host } : undefined
  } catch {
    return undefined // none yet (being acquired) or left half-written by a crash
  }
}

/**
 * Only a process on this host can be asked. Our own pid there is a previous incarnation's (a
 * restarted container runs as pid 1 again); a second open within this process waits and fails.
 */
function isAlive(owner: Owner): boolean {
  if (owner.host !== os.hostname() || owner.pid === process.pid) return false
  try {
    process.kill(owner.pid, 0)
  } catch (err) {
    return (err as { code?: unknown }).code === 'EPERM'
  }
  // After a crash its pid may have gone to another program: a live owner is a Node process.
  try {
    return readFileSync(`/proc/${owner.pid}/cmdline`, 'utf8').includes('node')
  } catch {
    return true // no /proc to ask (not Linux): the pid alone decides
  }
}
