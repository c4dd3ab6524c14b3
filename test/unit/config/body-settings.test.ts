import t from 'tap'
import { ConfigError, loadConfig } from '../../../src/config/index.js'

const problems = (env: Record<string, string>): string[] => {
  try {
    loadConfig(env)
  } catch (err) {
    if (err instanceof ConfigError) return err.problems
    throw err
  }
  return []
}

t.test('defaults: 100,000 JSON values a body, 256 MiB of bodies in flight (or a whole larger body)', async (t) => {
  const c = loadConfig({})
  t.equal(c.bodyMaxJsonValues, 100_000)
  t.equal(c.bodyBytesInFlight, 256 * 1024 * 1024)
  t.equal(loadConfig({ SVC_BODY_LIMIT_BYTES: String(512 * 1024 * 1024) }).bodyBytesInFlight, 512 * 1024 * 1024)
  t.equal(loadConfig({ SVC_REACTOR_PAYLOAD_MAX_BYTES: String(300 * 1024 * 1024) }).bodyBytesInFlight, 300 * 1024 * 1024)
})

t.test('set, they are validated like the others', async (t) => {
  const c = loadConfig({ SVC_BODY_MAX_JSON_VALUES: '5000', SVC_BODY_BYTES_IN_FLIGHT: '10485760' })
  t.equal(c.bodyMaxJsonValues, 5000)
  t.equal(c.bodyBytesInFlight, 10_485_760)
  t.match(problems({ SVC_BODY_MAX_JSON_VALUES: '0' }), [/SVC_BODY_MAX_JSON_VALUES must be >= 1/])
  t.match(problems({ SVC_BODY_MAX_JSON_VALUES: '1e5' }), [/SVC_BODY_MAX_JSON_VALUES must be a whole number in decimal digits/])
  t.match(problems({ SVC_BODY_BYTES_IN_FLIGHT: 'lots' }), [/SVC_BODY_BYTES_IN_FLIGHT/])
})

t.test('a budget smaller than one whole body is refused, naming both', async (t) => {
  t.match(problems({ SVC_BODY_BYTES_IN_FLIGHT: '1000000' }), [
    'SVC_BODY_LIMIT_BYTES (5242880) must not exceed SVC_BODY_BYTES_IN_FLIGHT (1000000)',
    'SVC_REACTOR_PAYLOAD_MAX_BYTES (5242880) must not exceed SVC_BODY_BYTES_IN_FLIGHT (1000000)',
  ])
  t.same(problems({ SVC_BODY_BYTES_IN_FLIGHT: '5242880' }), [])
})
