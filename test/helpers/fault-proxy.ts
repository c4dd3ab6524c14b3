import net from 'node:net'

export interface FaultProxy {
  /** `url` with its host and port replaced by the proxy's. */
  url: string
  /** Freeze: connections stay open, nothing passes either way, new ones are accepted but not served. */
  pause(): void
  /** Every open connection is reset (RST) at once; new connections pass. */
  reset(): void
  /** Every open connection is reset and new ones are refused, until `resume`. */
  drop(): void
  /**
   * The first connection that sends each of `patterns` in turn (for example `insert into
   * "tokens"`, then `COMMIT`) gets no answer after the last one: the statement reaches the
   * server and takes effect, its answer is lost. Resolves once that has happened.
   */
  loseAnswersAfter(...patterns: string[]): Promise<void>
  /**
   * A network partition of one connection: once it sent each of `patterns` in turn, nothing
   * passes either way, and when the client gives up on its socket the server is not told (its
   * FIN is lost too), so the server's session stays as it was, locks included, until `resume`.
   */
  partitionAfter(...patterns: string[]): Promise<void>
  /** Back to normal: paused data flows on. */
  resume(): void
  close(): Promise<void>
}

interface Pair {
  client: net.Socket
  upstream: net.Socket
  piped: boolean
  /** Answers are dropped (see loseAnswersAfter). */
  deaf?: boolean
  /** Cut both ways, and the server's side outlives the client's (see partitionAfter). */
  partitioned?: boolean
}

interface Trap {
  partition: boolean
  patterns: string[]
  progress: Map<Pair, number>
  sprung: () => void
}

/**
 * A TCP proxy in front of a real service (Postgres, Redis) that a test controls, so a fault is
 * injected without freezing the shared service. A few dozen lines of node:net.
 */
export async function startFaultProxy(t: { teardown(fn: () => unknown): void }, targetUrl: string): Promise<FaultProxy> {
  const target = new URL(targetUrl)
  const pairs = new Set<Pair>()
  let mode: 'pass' | 'paused' | 'dropped' = 'pass'
  let trap: Trap | undefined

  const link = (p: Pair) => {
    p.client.pipe(p.upstream)
    if (!p.deaf) p.upstream.pipe(p.client)
    p.piped = true
  }
  // Sees what a client sends; once the trap's patterns went by in order, the pair goes deaf.
  const watch = (p: Pair) =>
    p.client.on('data', (chunk: Buffer) => {
      if (trap === undefined || p.deaf) return
      const text = chunk.toString('latin1')
      let at = trap.progress.get(p) ?? 0
      while (at < trap.patterns.length && text.includes(trap.patterns[at]!)) at++
      trap.progress.set(p, at)
      if (at < trap.patterns.length) return
      p.deaf = true
      p.upstream.unpipe(p.client)
      if (trap.partition) {
        p.partitioned = true
        p.client.unpipe(p.upstream)
      }
      // Read and drop: the server's answer must not reach the client, nor back up the server.
      p.upstream.on('data', () => {})
      const { sprung } = trap
      trap = undefined
      sprung()
    })
  const unlink = (p: Pair) => {
    p.client.unpipe(p.upstream)
    p.upstream.unpipe(p.client)
    p.client.pause()
    p.upstream.pause()
    p.piped = false
  }
  const destroy = (p: Pair) => {
    p.client.resetAndDestroy()
    p.upstream.destroy()
    pairs.delete(p)
  }

  const server = net.createServer((client) => {
    if (mode === 'dropped') return void client.resetAndDestroy()
    const upstream = net.connect(Number(target.port), target.hostname)
    const pair: Pair = { client, upstream, piped: false }
    pairs.add(pair)
    watch(pair)
    const end = () => {
      if (pair.partitioned && !upstream.destroyed) return void client.destroy()
      if (!pairs.has(pair)) return
      pairs.delete(pair)
      client.destroy()
      upstream.destroy()
    }
    client.on('error', end).on('close', end)
    upstream.on('error', end).on('close', end)
    if (mode === 'pass') link(pair)
    else client.pause()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as net.AddressInfo).port
  const proxied = new URL(targetUrl)
  proxied.hostname = '127.0.0.1'
  proxied.port = String(port)

  const proxy: FaultProxy = {
    url: proxied.toString(),
    pause() {
      mode = 'paused'
      pairs.forEach(unlink)
    },
    reset() {
      pairs.forEach(destroy)
    },
    drop() {
      mode = 'dropped'
      pairs.forEach(destroy)
    },
    loseAnswersAfter(...patterns) {
      return new Promise<void>((sprung) => (trap = { partition: false, patterns, progress: new Map(), sprung }))
    },
    partitionAfter(...patterns) {
      return new Promise<void>((sprung) => (trap = { partition: true, patterns, progress: new Map(), sprung }))
    },
    resume() {
      mode = 'pass'
      for (const p of pairs) if (p.partitioned) destroy(p)
      for (const p of pairs) if (!p.piped) link(p)
    },
    async close() {
      mode = 'dropped'
      pairs.forEach(destroy)
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
  t.teardown(() => proxy.close())
  return proxy
}
