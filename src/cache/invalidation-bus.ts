import type { Logger } from 'pino'
import type { Database } from '../store/index.js'

/** A payload that names every key of a channel (sent when too many single keys are pending). */
export const EVERY_KEY = '*'

const MAX_PENDING_KEYS = 1_000
const FIRST_RETRY_MS = 500
const MAX_RETRY_MS = 10_000
/** How long a publisher waits to hear its own NOTIFY back (see publish). */
const ECHO_WAIT_MS = 1_000

export interface InvalidationBus {
  /** `handler` hears every key published on `channel`, from this process at once and from the others by NOTIFY. */
  subscribe(channel: string, handler: (key: string) => void): Promise<void>
  /**
   * Tells every process that `keys` changed (one NOTIFY statement for them all). Called after
   * the change committed, so it never rejects: the change stands whatever happens here. This
   * process hears them before this returns; on Postgres it also waits (up to 1 s) to hear its
   * own NOTIFYs back, so the other processes have been sent them before the writer answers. A
   * NOTIFY that fails is retried until the database takes it.
   */
  publish(channel: string, keys: string | readonly string[]): Promise<void>
  /** false while notifications may be missed: caches must not keep anything then. */
  readonly live: boolean
  /** `live` changed: on `false` and on `true` alike, everything cached may be stale. */
  onLiveChange(handler: (live: boolean) => void): void
}

/** The one way a cached value is invalidated, in this process and in every other one. */
export function createInvalidationBus(db: Database, logger: Logger): InvalidationBus {
  const local = new Map<string, ((key: string) => void)[]>()
  const liveHandlers: ((live: boolean) => void)[] = []
  const pending = new Map<string, Set<string>>()
  const echoes = new Map<string, (() => void)[]>()
  let retryMs = FIRST_RETRY_MS
  let retry: NodeJS.Timeout | undefined
  let live = true

  const deliver = (channel: string, key: string) => local.get(channel)?.forEach((fn) => fn(key))
  const echoKey = (channel: string, key: string) => `${channel}\n${key}`

  function heard(channel: string, key: string): void {
    const id = echoKey(channel, key)
    echoes.get(id)?.forEach((resolve) => resolve())
    echoes.delete(id)
    deliver(channel, key)
  }

  /** Resolves when this process's listener hears `key` on `channel`, or after ECHO_WAIT_MS. */
  function echoOf(channel: string, key: string): Promise<void> {
    if (db.kind !== 'postgres' || !live) return Promise.resolve()
    return new Promise((resolve) => {
      const id = echoKey(channel, key)
      const timer = setTimeout(resolve, ECHO_WAIT_MS)
      echoes.set(id, [...(echoes.get(id) ?? []), () => (clearTimeout(timer), resolve())])
    })
  }

  db.onListenerState((state) => {
    live = state === 'restored'
    for (const handler of liveHandlers) handler(live)
  })

  function keep(channel: string, key: string): void {
    const keys = pending.get(channel) ?? new Set<string>()
    pending.set(channel, keys.size >= MAX_PENDING_KEYS ? new Set([EVERY_KEY]) : keys.add(key))
    if (retry) return
    retry = setTimeout(flush, retryMs)
    retry.unref()
    retryMs = Math.min(MAX_RETRY_MS, retryMs * 2)
  }

  function flush(): void {
    retry = undefined
    const batch = [...pending].map(([channel, keys]) => [channel, [...keys]] as const)
    pending.clear()
    void Promise.all(batch.map(([channel, keys]) => send(channel, keys))).then((sent) => {
      if (sent.every(Boolean)) retryMs = FIRST_RETRY_MS
    })
  }

  async function send(channel: string, keys: readonly string[]): Promise<boolean> {
    try {
      await db.notify(channel, keys)
      return true
    } catch (err) {
      logger.warn({ err, channel, keys: keys.length }, 'could not announce an invalidation; will retry')
      for (const key of keys) keep(channel, key)
      return false
    }
  }

  return {
    async subscribe(channel, handler) {
      const handlers = local.get(channel)
      if (handlers) return void handlers.push(handler)
      local.set(channel, [handler])
      await db.listen(channel, (key) => heard(channel, key))
    },
    async publish(channel, key) {
      const keys = typeof key === 'string' ? [key] : key
      if (keys.length === 0) return
      for (const one of keys) deliver(channel, one)
      const echoes = keys.map((one) => echoOf(channel, one))
      if (await send(channel, keys)) await Promise.all(echoes)
    },
    get live() {
      return live
    },
    onLiveChange(handler) {
      liveHandlers.push(handler)
    },
  }
}
