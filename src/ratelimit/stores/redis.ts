import { Redis } from 'ioredis'
import type { Decision, RateLimitStore, ScopeHit, ScopeUsage } from '../types.js'
import { decide } from '../window.js'

/**
 * window.ts#applyHit on Redis, for all scopes of a request in one round trip. Expiry uses
 * PEXPIRE / SET PX, i.e. Redis's clock, so the clocks of several Tessera processes don't matter.
 * KEYS: per scope its counter then its block key. ARGV: per scope limit, windowMs, blockMs.
 * Returns per scope three numbers: the milliseconds it stays blocked (0: allowed), the count in
 * its window and the milliseconds left of that window (for the RateLimit-* headers).
 */
const HIT_SCRIPT = `
local out = {}
for i = 1, #KEYS / 2 do
  local counter, block = KEYS[2 * i - 1], KEYS[2 * i]
  local limit, windowMs, blockMs = tonumber(ARGV[3 * i - 2]), ARGV[3 * i - 1], ARGV[3 * i]
  local blocked = redis.call('PTTL', block)
  local b, count, left = 0, 0, 0
  if blocked > 0 then
    b, left = blocked, blocked
  else
    count = redis.call('INCR', counter)
    if count == 1 then redis.call('PEXPIRE', counter, windowMs) end
    if count > limit then
      redis.call('DEL', counter)
      redis.call('SET', block, '1', 'PX', blockMs)
      b, count, left = tonumber(blockMs), 0, tonumber(blockMs)
    else
      left = redis.call('PTTL', counter)
    end
  end
  out[3 * i - 2], out[3 * i - 1], out[3 * i] = b, count, left
end
return out
`

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
    // Right after start the connection is still opening; wait for it (bounded) rather than
    // report an outage for the first requests.
    if (!this.everReady) await this.waitReady()
    const base = `${this.keyPrefix}{${ip}}:`
    const keys: string[] = []
    const args: number[] = []
    for (const rule of scopes) {
      keys.push(`${base}${rule.scope}:n`, `${base}${rule.scope}:b`)
      args.push(rule.limit, rule.windowMs, rule.blockMs)
    }
    const reply = await this.client.tesseraRateHit(keys.length, ...keys, ...args)
    return decide(scopes, parseReply(reply, scopes.length))
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

function parseReply(reply: unknown, scopes: number): ScopeUsage[] {
  if (!Array.isArray(reply) || reply.length !== scopes * 3 || !reply.every((n) => typeof n === 'number')) {
    throw new Error(`Unexpected rate-limit script reply: ${JSON.stringify(reply)}`)
  }
  const numbers = reply as number[]
  return Array.from({ length: scopes }, (_, i) => ({ blockedMs: numbers[3 * i]!, count: numbers[3 * i + 1]!, resetMs: Math.max(0, numbers[3 * i + 2]!) }))
}
