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
  /** A second line behind NOTIFY: no entry is served older than this (default DEFAULT_TTL_MS); each ends somewhat sooner, at random, so entries loaded together are not reloaded together. */
  ttlMs?: number
  /** The instant (ms) an entry stops being valid on its own (an expiry in the data). */
  expiresAt?(value: V): number | undefined
  /**
   * Entries that depend on something another channel names (the Application a Reactor acts as):
   * `keyOf` is the key on that channel a value depends on, so an invalidation there finds its entries by look-up.
   */
  dependsOn?: { channel: string; keyOf(value: V): string | undefined }
  /** An entry left the cache (to wipe key material). */
  onEvict?(value: V): void
  /** What the TTL and `expiresAt` are measured against; the system clock by default. */
  clock?: Clock
}

export interface InvalidatingCache<V> {
  /**
   * From memory when cached and fresh; otherwise `load`, whose answer is kept unless an invalidation of
   * its key (or of what it depends on) raced with it. Concurrent misses of a key share one load,
   * so `load` must read nothing but what `key` names (put a tenant in the key, not only in `load`).
   */
  get(key: string, load: () => Promise<V | undefined>): Promise<V | undefined>
  /** The fresh cached value, without loading. */
  peek(key: string): V | undefined
  /** Counter for `put`: read it before loading. */
  generation(): number
  /** Keeps `value` unless its key, what it depends on or every key was invalidated (or the listener changed) since `seen` was read. */
  put(key: string, value: V, seen: number): void
  /** Drops `keys` here now and in every other process (by one NOTIFY statement); never rejects. */
  invalidate(keys: string | readonly string[]): Promise<void>
  /** Subscribes to the channels; before this, nothing is cached. */
  start(): Promise<void>
  stats(): { entries: number; bytes: number; caching: boolean }
}

/** The cache as most owners use it: it loads its own misses, since the key is all a load needs. */
export interface LoadingCache<V> {
  /** From memory when cached and fresh, else loaded (and kept); undefined when there is nothing to load. */
  get(key: string): Promise<V | undefined>
  /** Drops `keys` here now and in every other process. */
  invalidate(keys: string | readonly string[]): Promise<void>
  start(): Promise<void>
}

export function loadingCache<V>(cache: InvalidatingCache<V>, load: (key: string) => Promise<V | undefined>): LoadingCache<V> {
  return {
    get: (key) => cache.get(key, () => load(key)),
    invalidate: (keys) => cache.invalidate(keys),
    start: () => cache.start(),
  }
}

interface Entry<V> {
  value: V
  bytes: number
  /** ms: the TTL's end, or the value's own expiry if sooner. */
  until: number
  /** Its key on `dependsOn.channel`. */
  dependsOn: string | undefined
}

/** A load that concurrent misses of its key share. */
interface Flight<V> {
  /** The generation when it started. */
  seen: number
  value: Promise<V | undefined>
}

/**
 * Every cache's second line: an invalidation that never arrived (the change's answer was lost
 * after its commit, its NOTIFY failed and the writer died before a retry) leaves a revoked key,
 * a narrowed grant or a deleted Reactor served no longer than this.
 */
export const DEFAULT_TTL_MS = 30_000

/** Bookkeeping per entry beyond `sizeOf`: the Map slot, the entry object, the key's header. */
const ENTRY_OVERHEAD_BYTES = 96

/** An entry ends between this share of the TTL and the TTL, at random. */
const TTL_SPREAD = 0.2

/** Invalidated keys told apart per cache; a load that ran across more is treated as raced with them all. */
const REMEMBERED_INVALIDATIONS = 4_096

/**
 * The generation at which each recently invalidated key last was, so a load is discarded only
 * when its own key changed while it ran (one unrelated invalidation every few ms must not stop
 * a cache from filling). Bounded: what is forgotten counts as invalidated at its generation.
 */
function invalidationLog() {
  const at = new Map<string, number>()
  let forgotten = 0
  return {
    note(key: string, generation: number): void {
      // Map order is insertion order: re-inserting keeps the oldest first.
      at.delete(key)
      at.set(key, generation)
      for (const [oldest, when] of at) {
        if (at.size <= REMEMBERED_INVALIDATIONS) break
        at.delete(oldest)
        forgotten = when
      }
    },
    forgetAll(generation: number): void {
      at.clear()
      forgotten = generation
    },
    /** `key` may have been invalidated after `seen`. */
    since(key: string, seen: number): boolean {
      return seen < forgotten || (at.get(key) ?? 0) > seen
    },
  }
}

/**
 * The in-process cache for anything another Tessera process can change. One policy for all:
 * bounded by entries and by bytes (LRU), optional TTL; invalidated through the bus (this
 * process at once, the others by Postgres NOTIFY); a load that raced with an invalidation of
 * its key (or of what it depends on, or of every key) is not kept; concurrent misses of a key
 * share one load; and while the listener is lost nothing is cached (a missed notification would
 * leave a stale entry). When the listener is back every entry is dropped and caching resumes.
 */
export function createInvalidatingCache<V>(options: InvalidatingCacheOptions<V>): InvalidatingCache<V> {
  const { bus, maxEntries, maxBytes, clock = systemClock, ttlMs = DEFAULT_TTL_MS, dependsOn } = options
  const entries = new Map<string, Entry<V>>()
  /** Cached keys by their key on `dependsOn.channel`. */
  const dependents = new Map<string, Set<string>>()
  const flights = new Map<string, Flight<V>>()
  const invalidated = invalidationLog()
  let bytes = 0
  let generation = 0
  let started = false

  const caching = () => started && bus.live
  // Channels differ and have no newline, so one log holds the keys of both.
  const logKey = (channel: string, key: string) => `${channel}\n${key}`

  function remove(key: string): void {
    const entry = entries.get(key)
    if (entry === undefined) return
    entries.delete(key)
    bytes -= entry.bytes
    if (entry.dependsOn !== undefined) {
      const keys = dependents.get(entry.dependsOn)
      keys?.delete(key)
      if (keys?.size === 0) dependents.delete(entry.dependsOn)
    }
    options.onEvict?.(entry.value)
  }

  function clear(): void {
    invalidated.forgetAll(++generation)
    flights.clear()
    for (const key of [...entries.keys()]) remove(key)
  }

  function drop(key: string): void {
    if (key === EVERY_KEY) return clear()
    invalidated.note(logKey(options.channel, key), ++generation)
    // Misses from now on must not share a load that may have read the value from before.
    flights.delete(key)
    remove(key)
  }

  function dropDependents(channel: string, key: string): void {
    if (key === EVERY_KEY) return clear()
    invalidated.note(logKey(channel, key), ++generation)
    for (const dependent of [...(dependents.get(key) ?? [])]) remove(dependent)
  }

  /**
   * `value` (of `key`, loaded since `seen`) may be stale: an entry not yet cached is matched
   * against what was invalidated while it loaded by the key it depends on now.
   */
  function raced(key: string, value: V | undefined, seen: number): boolean {
    if (invalidated.since(logKey(options.channel, key), seen)) return true
    if (value === undefined || dependsOn === undefined) return false
    const on = dependsOn.keyOf(value)
    return on !== undefined && invalidated.since(logKey(dependsOn.channel, on), seen)
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
    if (!caching() || raced(key, value, seen)) return
    remove(key)
    const size = options.sizeOf(value) + key.length * 2 + ENTRY_OVERHEAD_BYTES
    if (size > maxBytes) return
    for (const oldest of entries.keys()) {
      if (entries.size < maxEntries && bytes + size <= maxBytes) break
      remove(oldest)
    }
    const ttl = ttlMs * (1 - TTL_SPREAD * Math.random())
    const on = dependsOn?.keyOf(value)
    entries.set(key, { value, bytes: size, until: Math.min(clock() + ttl, options.expiresAt?.(value) ?? Infinity), dependsOn: on })
    bytes += size
    if (on !== undefined) dependents.set(on, (dependents.get(on) ?? new Set()).add(key))
  }

  function share(key: string, load: () => Promise<V | undefined>): Flight<V> {
    // Its awaiters resume after it has left `flights`, so none of them can join it again.
    const value = load().finally(() => flights.get(key) === flight && flights.delete(key))
    const flight = { seen: generation, value }
    flights.set(key, flight)
    return flight
  }

  async function get(key: string, load: () => Promise<V | undefined>): Promise<V | undefined> {
    const hit = peek(key)
    if (hit !== undefined) return hit
    if (!caching()) return load()
    const joined = flights.get(key)
    const flight = joined ?? share(key, load)
    const value = await flight.value
    if (joined === undefined) {
      if (value !== undefined) put(key, value, flight.seen)
      return value
    }
    // A joiner may have come after the invalidation that made this load stale: it loads again.
    return raced(key, value, flight.seen) ? get(key, load) : value
  }

  return {
    get,
    peek,
    generation: () => generation,
    put,
    invalidate: (keys) => bus.publish(options.channel, keys),
    async start() {
      if (started) return
      await bus.subscribe(options.channel, drop)
      if (dependsOn) await bus.subscribe(dependsOn.channel, (key) => dropDependents(dependsOn.channel, key))
      // Lost or back, what is cached may have missed a notification.
      bus.onLiveChange(clear)
      started = true
    },
    stats: () => ({ entries: entries.size, bytes, caching: caching() }),
  }
}
