import t from 'tap'
import { loadConfig } from '../../../src/config/index.js'

t.test('bridge bounds of one Reactor invocation: defaults, settings, refusals', async (t) => {
  t.same(loadConfig({}).reactors.bridges, { concurrency: 8, answerMaxBytes: 4 * 5 * 1024 * 1024 })
  t.same(loadConfig({ SVC_REACTOR_PAYLOAD_MAX_BYTES: '1000' }).reactors.bridges.answerMaxBytes, 4000, 'the budget follows the payload limit by default')
  t.same(loadConfig({ SVC_REACTOR_BRIDGE_CONCURRENCY: '2', SVC_REACTOR_BRIDGE_ANSWER_MAX_BYTES: '12345' }).reactors.bridges, { concurrency: 2, answerMaxBytes: 12_345 })
  t.throws(() => loadConfig({ SVC_REACTOR_BRIDGE_CONCURRENCY: '0' }), /SVC_REACTOR_BRIDGE_CONCURRENCY must be >= 1/)
  t.throws(() => loadConfig({ SVC_REACTOR_BRIDGE_CONCURRENCY: '1001' }), /SVC_REACTOR_BRIDGE_CONCURRENCY must be <= 1000/)
  t.throws(() => loadConfig({ SVC_REACTOR_BRIDGE_CONCURRENCY: '8x' }), /SVC_REACTOR_BRIDGE_CONCURRENCY must be a whole number/)
  t.throws(() => loadConfig({ SVC_REACTOR_BRIDGE_ANSWER_MAX_BYTES: '0' }), /SVC_REACTOR_BRIDGE_ANSWER_MAX_BYTES must be >= 1/)
  t.throws(() => loadConfig({ SVC_REACTOR_BRIDGE_CONCURENCY: '4' }), /did you mean SVC_REACTOR_BRIDGE_CONCURRENCY/)
})
