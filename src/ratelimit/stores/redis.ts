import { Redis } from 'ioredis'
import type { Decision, RateLimitStore, ScopeHit, ScopeUsage } from '../types.js'
import { decide } from '../window.js'

/**
 * window.ts#applyHit on Redis, for the scopes of a request in one round trip, taking a lease of
 * up to `want` requests of each scope's budget at once (see leases.ts; `want` 1 is one request).
 * A lease is never more than the window has left, so the units granted in a window never
 * exceed its limit; the request that finds nothing left overflows and blocks, as in applyHit.
 * Expiry uses PEXPIRE / SET PX, i.e. Redis's clock, so the clocks of several Tessera processes
 * don't matter.
 * `carried`: units of the current window a lease still holds (counted already, unused). While the
 * window they were counted in lasts (the caller only carries units of a window it knows has not
 * ended, and its counter exists), the request uses one of them and only the top-up to `want` is
 * counted; otherwise they are void and the request counts as usual.
 * KEYS: per scope its counter then its block key. ARGV: per scope limit, windowMs, blockMs, want,
 * carried. Returns per scope five numbers: the milliseconds it stays blocked (0: allowed), the
 * count in its window, the milliseconds left of that window, the units granted (0 when blocked)
 * and 1 when the carried units still count (0 when void).
 */
const HIT_SCRIPT = `
local out = {}
for i = 1, #KEYS / 2 do
  local counter, block = KEYS[2 * i - 1], KEYS[2 * i]
  local a = 5 * i
  local limit, windowMs, blockMs, want, carried = tonumber(ARGV[a - 4]), ARGV[a - 3], ARGV[a - 2], tonumber(ARGV[a - 1]), tonumber(ARGV[a])
  local blocked = redis.call('PTTL', block)
  local b, count, left, granted, kept = 0, 0, 0, 0, 0
  if blocked > 0 then
    b, left = blocked, blocked
  else
    local current = tonumber(redis.call('GET', counter) or '0')
    if carried > 0 and current > 0 then
      kept = 1
      granted = math.max(0, math.min(want - carried, limit - current))
      count = current
      if granted > 0 then count = redis.call('INCRBY', counter, granted) end
      left = redis.call('PTTL', counter)
    else
      local grant = math.max(1, math.min(want, limit - current))
      count = redis.call('INCRBY', counter, grant)
      if count == grant then redis.call('PEXPIRE', counter, windowMs) end
      if count > limit then
        redis.call('DEL', counter)
        redis.call('SET', block, '1', 'PX', blockMs)
        b, count, left = tonumber(blockMs), 0, tonumber(blockMs)
      else
        granted = grant
        left = redis.call('PTTL', counter)
      end
    end
  end
  out[a - 4], out[a - 3], out[a - 2], out[a - 1], out[a] = b, count, left, granted, kept
end
return out
`

/** One scope's answer from Redis: its usage after the hit, the units of budget granted, and whether the carried units still count. */
export interface ScopeGrant extends ScopeUsage {
  granted: number
  kept: boolean
}

interface HitCommand {
  tesseraRateHit(numKeys: number, ...keysAndArgs: (string | number)[]): Promise<unknown>
}

export interface RedisStoreOptions {
  url: string
  /** Every command, the first connection included, gives up after this long. */
  commandTimeoutMs: number
  /** Key namespace; tests use a unique one each. */
  keyPrefix?: string
}

/** Shared windows in Redis. Fails fast (never queues) so the caller can fall back to memory. */
export class RedisStore implements RateLimitStore {
  private readonly client: Redis & HitCommand
  private readonly keyPrefix: string
  private readonly timeoutMs: number
  private everReady = false
  private readyWait: Promise<void> | undefined

  constructor(options: RedisStoreOptions) {
    this.keyPrefix = options.keyPrefix ?? 'tessera:rl:'
    this.timeoutMs = options.commandTimeoutMs
    const client = new Redis(options.url, {
      // Without a connection a command must fail at once, not wait in a queue and replay a
      // stale count later; a command in flight when the link drops fails instead of retrying.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: options.commandTimeoutMs,
      connectTimeout: Math.max(2000, options.commandTimeoutMs * 4),
      retryStrategy: (attempt) => Math.min(attempt * 100, 2000),
    })
    client.defineCommand('tesseraRateHit', { lua: HIT_SCRIPT })
    // Connection errors surface as rejected commands; the fallback store logs them once per
    // outage. Without a listener ioredis would print every reconnect failure.
    client.on('error', () => undefined)
    client.once('ready', () => {
      this.everReady = true
    })
    this.client = client as Redis & HitCommand
  }

  async hit(ip: string, scopes: readonly ScopeHit[]): Promise<Decision> {
    return decide(scopes, await this.take(ip, scopes, [], []))
  }

  /**
   * Counts one request of `ip` in `scopes`, taking up to `wants[i]` units of scope i's budget
   * (default 1), of which `carried[i]` (default 0) are a lease's unused units of the current window.
   */
  async take(ip: string, scopes: readonly ScopeHit[], wants: readonly number[], carried: readonly number[]): Promise<ScopeGrant[]> {
    // Right after start the connection is still opening; wait for it (bounded) rather than
    // report an outage for the first requests.
    if (!this.everReady) await this.waitReady()
    const base = `${this.keyPrefix}{${ip}}:`
    const keys: string[] = []
    const args: number[] = []
    for (const [i, rule] of scopes.entries()) {
      keys.push(`${base}${rule.scope}:n`, `${base}${rule.scope}:b`)
      args.push(rule.limit, rule.windowMs, rule.blockMs, wants[i] ?? 1, carried[i] ?? 0)
    }
    const reply = await this.client.tesseraRateHit(keys.length, ...keys, ...args)
    return parseReply(reply, scopes.length)
  }

  async close(): Promise<void> {
    try {
      await this.client.quit()
    } catch {
      this.client.disconnect()
    }
  }

  /** False while the connection is down or still opening (a frozen server still looks connected). */
  get connected(): boolean {
    return this.client.status === 'ready'
  }

  /** One shared wait, so a burst at start-up doesn't add a listener per request. */
  private waitReady(): Promise<void> {
    this.readyWait ??= new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer)
        this.client.off('ready', done)
        this.readyWait = undefined
        resolve()
      }
      const timer = setTimeout(done, this.timeoutMs)
      this.client.once('ready', done)
    })
    return this.readyWait
  }
}

function parseReply(reply: unknown, scopes: number): ScopeGrant[] {
  if (!Array.isArray(reply) || reply.length !== scopes * 5 || !reply.every((n) => typeof n === 'number')) {
    throw new Error(`Unexpected rate-limit script reply: ${JSON.stringify(reply)}`)
  }
  const n = reply as number[]
  return Array.from({ length: scopes }, (_, i) => ({ blockedMs: n[5 * i]!, count: n[5 * i + 1]!, resetMs: Math.max(0, n[5 * i + 2]!), granted: n[5 * i + 3]!, kept: n[5 * i + 4] === 1 }))
}
