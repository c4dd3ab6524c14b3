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
 * the lock behind, and then the opener waits until it goes stale, which a live one never does.
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
    onCompromised: (err: Error) => logger?.error({ err, dir: real }, 'the lock on the data directory could not be refreshed in time'),
  }
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
    rmSync(ownerFile, { force: true })
    await release()
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
    return true
  } catch (err) {
    return (err as { code?: unknown }).code === 'EPERM'
  }
}
