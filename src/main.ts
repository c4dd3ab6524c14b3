import http from 'node:http'
import type { Socket } from 'node:net'
import { buildApp } from './app.js'
import { ConfigError, loadConfig } from './config/index.js'
import { resolveSecrets } from './config/secrets.js'
import { createLogger } from './logger.js'
import { openServices } from './services.js'

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
  const services = await openServices(config, logger, secrets)
  const app = buildApp(services)
  const server = http.createServer(app.callback())
  // Slow clients must not hold sockets forever.
  server.headersTimeout = 15_000
  server.requestTimeout = 120_000
  server.keepAliveTimeout = 5_000
  const sockets = new Set<Socket>()
  server.on('connection', (s) => {
    sockets.add(s)
    s.on('close', () => sockets.delete(s))
  })
  await new Promise<void>((resolve) => server.listen(config.port, config.host, resolve))
  const address = server.address()
  logger.info({ address }, 'tessera listening')

  let stopping = false
  const stop = async (signal: string) => {
    if (stopping) return
    stopping = true
    logger.info({ signal }, 'draining')
    const force = setTimeout(() => sockets.forEach((s) => s.destroy()), config.shutdownGraceMs)
    force.unref()
    server.closeIdleConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
    await services.close()
    logger.info('stopped')
    process.exit(0)
  }
  process.on('SIGTERM', () => void stop('SIGTERM'))
  process.on('SIGINT', () => void stop('SIGINT'))
}

main().catch((err: unknown) => {
  process.stderr.write(`tessera failed to start: ${err instanceof Error ? err.message : String(err)}\n`)
  process.exit(1)
})
