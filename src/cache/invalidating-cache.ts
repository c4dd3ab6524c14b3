import { systemClock, type Clock } from '../clock.js'
import { EVERY_KEY, type InvalidationBus } from './invalidation-bus.js'

export interface InvalidatingCacheOptions<V> {
  bus: InvalidationBus
  /** Keys published here (by any process) are dropped. */
  channel: string
  maxEntries: number
  /** Approximate bytes of all entries (see `sizeOf`); least recently used entries leave first. */
  maxBytes: number
  /** Approximate bytes an entry holds beyond its key. */
  sizeOf(value: V): number
  /** A second line behind NOTIFY: no entry is served older than this (default DEFAULT_TTL_MS). */
  ttlMs?: number
  /** The instant (ms) an entry stops being valid on its own (an expiry in the data). */
  expiresAt?(value: V): number | undefined
  /** Entries that depend on something another channel names (the Application a Reactor acts as). */
  dependsOn?: { channel: string; matches(value: V, key: string): boolean }
  /** An entry left the cache (to wipe key material). */
  onEvict?(value: V): void
  /** What the TTL and `expiresAt` are measured against; the system clock by default. */
  clock?: Clock
}

export interface InvalidatingCache<V> {
  /** From memory when cached and fresh; otherwise `load`, whose answer is kept unless an invalidation raced with it. */
  get(key: string, load: () => Promise<V | undefined>): Promise<V | undefined>
  /** The fresh cached value, without loading. */
  peek(key: string): V | undefined
  /** Counter for `put`: read it before loading. */
  generation(): number
  /** Keeps `value` unless an invalidation (or a listener change) happened since `seen` was read. */
  put(key: string, value: V, seen: number): void
  /** Drops `key` here now and in every other process (by NOTIFY); never rejects. */
  invalidate(key: string): Promise<void>
  /** Subscribes to the channels; before this, nothing is cached. */
  start(): Promise<void>
  stats(): { entries: number; bytes: number; caching: boolean }
}

/** The cache as most owners use it: it loads its own misses, since the key is all a load needs. */
export interface LoadingCache<V> {
  /** From memory when cached and fresh, else loaded (and kept); undefined when there is nothing to load. */
  get(key: string): Promise<V | undefined>
  /** Drops `key` here now and in every other process. */
  invalidate(key: string): Promise<void>
  start(): Promise<void>
}

export function loadingCache<V>(cache: InvalidatingCache<V>, load: (key: string) => Promise<V | undefined>): LoadingCache<V> {
  return {
    get: (key) => cache.get(key, () => load(key)),
    invalidate: (key) => cache.invalidate(key),
    start: () => cache.start(),
  }
}

interface Entry<V> {
  value: V
  bytes: number
  /** ms: the TTL's end, or the value's own expiry if sooner. */
  until: number
}

/**
 * Every cache's second line: an invalidation that never arrived (the change's answer was lost
 * after its commit, its NOTIFY failed and the writer died before a retry) leaves a revoked key,
 * a narrowed grant or a deleted Reactor served no longer than this.
 */
export const DEFAULT_TTL_MS = 30_000

/** Bookkeeping per entry beyond `sizeOf`: the Map slot, the entry object, the key's header. */
const ENTRY_OVERHEAD_BYTES = 96

/**
 * The in-process cache for anything another Tessera process can change. One policy for all:
 * bounded by entries and by bytes (LRU), optional TTL; invalidated through the bus (this
 * process at once, the others by Postgres NOTIFY); a load that raced with an invalidation is
 * not kept; and while the listener is lost nothing is cached (a missed notification would
 * leave a stale entry). When the listener is back every entry is dropped and caching resumes.
 */
export function createInvalidatingCache<V>(options: InvalidatingCacheOptions<V>): InvalidatingCache<V> {
  const { bus, maxEntries, maxBytes, clock = systemClock, ttlMs = DEFAULT_TTL_MS } = options
  const entries = new Map<string, Entry<V>>()
  let bytes = 0
  let generation = 0
  let started = false

  const caching = () => started && bus.live

  function remove(key: string): void {
    const entry = entries.get(key)
    if (entry === undefined) return
    entries.delete(key)
    bytes -= entry.bytes
    options.onEvict?.(entry.value)
  }

  function clear(): void {
    generation++
    for (const key of [...entries.keys()]) remove(key)
  }

  function drop(key: string): void {
    if (key === EVERY_KEY) return clear()
    generation++
    remove(key)
  }

  function peek(key: string): V | undefined {
    const entry = entries.get(key)
    if (entry === undefined) return undefined
    if (entry.until <= clock()) return void remove(key)
    // Map order is insertion order: moving a hit to the end keeps eviction least-recently-used.
    entries.delete(key)
    entries.set(key, entry)
    return entry.value
  }

  function put(key: string, value: V, seen: number): void {
    if (!caching() || seen !== generation) return
    remove(key)
    const size = options.sizeOf(value) + key.length * 2 + ENTRY_OVERHEAD_BYTES
    if (size > maxBytes) return
    for (const oldest of entries.keys()) {
      if (entries.size < maxEntries && bytes + size <= maxBytes) break
      remove(oldest)
    }
    entries.set(key, { value, bytes: size, until: Math.min(clock() + ttlMs, options.expiresAt?.(value) ?? Infinity) })
    bytes += size
  }

  return {
    async get(key, load) {
      const hit = peek(key)
      if (hit !== undefined) return hit
      const seen = generation
      const value = await load()
      if (value !== undefined) put(key, value, seen)
      return value
    },
    peek,
    generation: () => generation,
    put,
    invalidate: (key) => bus.publish(options.channel, key),
    async start() {
      if (started) return
      await bus.subscribe(options.channel, drop)
      const dependsOn = options.dependsOn
      if (dependsOn) {
        await bus.subscribe(dependsOn.channel, (key) => {
          generation++
          for (const [k, entry] of entries) if (key === EVERY_KEY || dependsOn.matches(entry.value, key)) remove(k)
        })
      }
      // Lost or back, what is cached may have missed a notification.
      bus.onLiveChange(clear)
      started = true
    },
    stats: () => ({ entries: entries.size, bytes, caching: caching() }),
  }
}
