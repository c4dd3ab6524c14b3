import http from 'node:http'
import { buildApp } from './app.js'
import { ConfigError, loadConfig } from './config/index.js'
import { resolveSecrets } from './config/secrets.js'
import { createLogger } from './logger.js'
import { Drain } from './http/drain.js'
import { presentToken } from './http/presenters/tokens.js'
import { openServices } from './services.js'
import { startMetricsServer } from './metrics/exposition.js'
import { drainAndExit, trackConnections } from './shutdown.js'

/** loadConfig -> open stores -> buildApp -> listen -> graceful close on SIGTERM/SIGINT. */
async function main(): Promise<void> {
  let config
  try {
    config = loadConfig()
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`)
      process.exit(2)
    }
    throw err
  }
  const logger = createLogger(config)
  const secrets = resolveSecrets(config)
  for (const name of secrets.generated) {
    logger.warn({ file: `${config.dataDir}/secrets.json` }, `no ${name === 'master_key' ? 'SVC_MASTER_KEY' : 'SVC_KEY_HASH_SECRET'} set: generated one into the data dir; set it explicitly in production`)
  }
  const services = await openServices(config, logger, secrets, { presentToken })
  const drain = new Drain()
  const server = http.createServer()
  const tracked = trackConnections(server, drain)
  server.on('request', buildApp(services, drain).callback())
  // Slow clients must not hold sockets forever.
  server.headersTimeout = 15_000
  server.requestTimeout = 120_000
  server.keepAliveTimeout = 5_000
  await listen(server, config.port, config.host).catch((err: unknown) => {
    throw cannotListen(err, `HOST=${config.host} PORT=${config.port}`)
  })
  const address = server.address()
  logger.info({ address }, 'tessera listening')
  if (config.metrics.mode === 'port') {
    // Dies with the process; a scrape during the drain still answers.
    const metricsServer = await startMetricsServer(services.metrics, config.metrics.host, config.metrics.port, logger).catch((err: unknown) => {
      throw cannotListen(err, `SVC_METRICS_HOST=${config.metrics.host} SVC_METRICS_PORT=${config.metrics.port}`)
    })
    metricsServer.unref()
    logger.info({ address: metricsServer.address() }, 'metrics listening')
  }

  const stop = (signal: string) => {
    if (drain.draining) return
    logger.info({ signal }, 'shutting down')
    void drainAndExit(server, services, drain, logger, tracked)
  }
  process.on('SIGTERM', () => stop('SIGTERM'))
  process.on('SIGINT', () => stop('SIGINT'))
}

/** Without an 'error' listener a failed listen (a name that does not resolve, a port in use) crashes with a stack. */
function listen(server: http.Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      server.off('error', reject)
      resolve()
    })
  })
}

const LISTEN_FAILURES: Record<string, string> = {
  EADDRINUSE: 'address in use',
  EADDRNOTAVAIL: 'address not available on this machine',
  EACCES: 'permission denied',
  ENOTFOUND: 'host name not found',
  EAI_AGAIN: 'host name lookup failed',
}

/** One line naming the variables to change, for `main().catch`; the Node error stays the cause. */
function cannotListen(err: unknown, where: string): Error {
  const code = (err as NodeJS.ErrnoException).code
  const reason = (code === undefined ? undefined : LISTEN_FAILURES[code]) ?? (err instanceof Error ? err.message : String(err))
  return new Error(`cannot listen on ${where}: ${reason}`, { cause: err })
}

main().catch((err: unknown) => {
  process.stderr.write(`tessera failed to start: ${err instanceof Error ? err.message : String(err)}\n`)
  process.exit(1)
})
