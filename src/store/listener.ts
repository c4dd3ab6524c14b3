import pg from 'pg'
import type { Logger } from 'pino'

export type ListenerState = 'lost' | 'restored'

export interface ListenerOptions {
  url: string
  logger: Logger | undefined
  /** Connect and heartbeat time-out. */
  timeoutMs: number
  backoffMaxMs: number
}

const FIRST_BACKOFF_MS = 100
/** A frozen server never closes the socket: the heartbeat is what notices it. */
const HEARTBEAT_MS = 2_000

/**
 * The one connection that LISTENs for this process. When it is lost (error, end, or a heartbeat
 * that got no answer) notifications may be missed: listeners hear `lost` at once, and the
 * connection is re-established with exponential backoff, every channel is LISTENed again, and
 * then they hear `restored` (what was missed meanwhile is unknown).
 */
export class Listener {
  private client: pg.Client | undefined
  private readonly handlers = new Map<string, ((payload: string) => void)[]>()
  private readonly stateHandlers: ((state: ListenerState) => void)[] = []
  private backoffMs = FIRST_BACKOFF_MS
  private retry: NodeJS.Timeout | undefined
  private heartbeat: NodeJS.Timeout | undefined
  private connecting: Promise<void> | undefined
  private started = false
  private closed = false

  constructor(private readonly options: ListenerOptions) {}

  get listening(): boolean {
    return this.client !== undefined
  }

  async listen(channel: string, onMessage: (payload: string) => void): Promise<void> {
    const list = this.handlers.get(channel)
    if (list) return void list.push(onMessage)
    this.handlers.set(channel, [onMessage])
    if (this.client) return void (await this.client.query(`LISTEN ${pg.escapeIdentifier(channel)}`))
    if (!this.started) {
      this.started = true
      this.connecting = this.connect()
    }
    // Undefined while a reconnect is scheduled: it LISTENs on every channel when it succeeds.
    await this.connecting
  }

  onState(handler: (state: ListenerState) => void): void {
    this.stateHandlers.push(handler)
  }

  async close(): Promise<void> {
    this.closed = true
    clearTimeout(this.retry)
    clearInterval(this.heartbeat)
    const client = this.client
    this.client = undefined
    await client?.end().catch(() => undefined)
  }

  private async connect(): Promise<void> {
    const { url, timeoutMs } = this.options
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: timeoutMs, query_timeout: timeoutMs, keepAlive: true })
    client.on('notification', (msg) => this.handlers.get(msg.channel)?.forEach((fn) => fn(msg.payload ?? '')))
    client.on('error', (err) => this.lose(client, err))
    client.on('end', () => this.lose(client, undefined))
    try {
      await client.connect()
      for (const channel of this.handlers.keys()) await client.query(`LISTEN ${pg.escapeIdentifier(channel)}`)
    } catch (err) {
      this.connecting = undefined
      void client.end().catch(() => undefined)
      throw err
    }
    this.connecting = undefined
    if (this.closed) return void client.end().catch(() => undefined)
    this.client = client
    this.backoffMs = FIRST_BACKOFF_MS
    this.heartbeat = setInterval(() => client.query('select 1').catch((err: unknown) => this.lose(client, err)), HEARTBEAT_MS)
    this.heartbeat.unref()
  }

  private lose(client: pg.Client, err: unknown): void {
    if (client !== this.client || this.closed) return
    this.client = undefined
    clearInterval(this.heartbeat)
    // A connection that stopped answering is closed for good, so it cannot deliver late.
    ;(client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy()
    this.options.logger?.error({ err }, 'lost the database listener: caches are off until it is back')
    this.emit('lost')
    this.scheduleReconnect()
  }

  private scheduleReconnect(): void {
    if (this.closed) return
    const delay = this.backoffMs
    this.backoffMs = Math.min(this.options.backoffMaxMs, this.backoffMs * 2)
    this.retry = setTimeout(() => {
      this.connect().then(
        () => {
          this.options.logger?.info('database listener re-established: caches dropped and back on')
          this.emit('restored')
        },
        () => this.scheduleReconnect(),
      )
    }, delay)
    this.retry.unref()
  }

  private emit(state: ListenerState): void {
    for (const handler of this.stateHandlers) handler(state)
  }
}
