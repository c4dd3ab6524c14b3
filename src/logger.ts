import { pino, type DestinationStream, type Logger } from 'pino'
import type { Config } from './config/index.js'
import { loggableError } from './errors/log-safe.js'

/**
 * The service logger. Keys, bodies and token data are never passed to it; the redaction list
 * is a second line of defence for headers that might slip into a logged object. Every `err`
 * is logged described (class, code, frames; never its message, which may quote data), so no
 * call site can forget it.
 */
export function createLogger(config: Pick<Config, 'logLevel'>, destination?: DestinationStream): Logger {
  const options = {
    level: config.logLevel,
    base: { service: 'tessera' },
    serializers: { err: loggableError },
    redact: {
      paths: ['*.headers["svc-api-key"]', '*.headers["svc-proxy-key"]', '*.headers.authorization', 'key', '*.key', 'data', '*.data'],
      censor: '[redacted]',
    },
  }
  return destination ? pino(options, destination) : pino(options)
}
