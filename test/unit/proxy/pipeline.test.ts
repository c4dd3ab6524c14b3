import type { JSONSchemaType } from 'ajv'
import t from 'tap'
import type { Principal } from '../../../src/auth/principal.js'
import { createPipeline, registerPlugin, type Exchange, type ProxyPlugin } from '../../../src/proxy/pipeline/index.js'

interface Cfg {
  tag: string
}
const schema: JSONSchemaType<Cfg> = { type: 'object', properties: { tag: { type: 'string' } }, required: ['tag'], additionalProperties: false }

function recorder(name: string, priority: number, log: string[], respondAt?: 'beforeForward' | 'afterForward'): ProxyPlugin<Cfg> {
  return {
    name,
    priority,
    configSchema: schema,
    async beforeForward(_exchange, config) {
      log.push(`${config.tag}:before`)
      if (respondAt === 'beforeForward') return { status: 418, headers: {}, body: name }
    },
    async afterForward(_exchange, config) {
      log.push(`${config.tag}:after`)
      if (respondAt === 'afterForward') return { status: 418, headers: {}, body: name }
    },
  }
}

const exchange = {
  principal: {} as Principal,
  destination: { url: new URL('https://example.com'), origin: 'https://example.com', path: '/' },
  incoming: { method: 'GET', path: '', query: '', headers: [], body: Buffer.alloc(0) },
  outgoing: { headers: [], body: null },
  response: undefined,
  caller: { signal: new AbortController().signal },
} satisfies Exchange

t.test('handlers run in priority order, higher first; equal priorities keep registration order', async (t) => {
  const log: string[] = []
  const pipeline = createPipeline([
    registerPlugin(recorder('low', 1, log), { tag: 'low' }),
    registerPlugin(recorder('high', 10, log), { tag: 'high' }),
    registerPlugin(recorder('mid-a', 5, log), { tag: 'a' }),
    registerPlugin(recorder('mid-b', 5, log), { tag: 'b' }),
  ])
  t.same(pipeline.plugins, ['high', 'mid-a', 'mid-b', 'low'])
  t.equal(await pipeline.run('beforeForward', exchange), undefined)
  t.same(log, ['high:before', 'a:before', 'b:before', 'low:before'])
})

t.test('a Respond short-circuits the rest of the stage', async (t) => {
  const log: string[] = []
  const pipeline = createPipeline([
    registerPlugin(recorder('first', 2, log, 'afterForward'), { tag: 'first' }),
    registerPlugin(recorder('second', 1, log), { tag: 'second' }),
  ])
  await pipeline.run('beforeForward', exchange)
  const answer = await pipeline.run('afterForward', exchange)
  t.match(answer, { status: 418, body: 'first' })
  t.same(log, ['first:before', 'second:before', 'first:after'])
})

t.test('plugins without a stage method are skipped for that stage', async (t) => {
  const only: ProxyPlugin<Cfg> = { name: 'only-before', priority: 1, configSchema: schema, beforeForward: async () => undefined }
  const pipeline = createPipeline([registerPlugin(only, { tag: 'x' })])
  t.equal(await pipeline.run('afterForward', exchange), undefined)
})

t.test('config is validated at registration, and names are unique', async (t) => {
  t.throws(() => registerPlugin(recorder('bad', 1, []), { tag: 3 } as never), /proxy plugin bad: invalid config/)
  t.throws(() => registerPlugin(recorder('bad', 1, []), { tag: 'x', extra: 1 } as never), /invalid config/)
  const one = registerPlugin(recorder('same', 1, []), { tag: 'x' })
  t.throws(() => createPipeline([one, one]), /registered twice/)
})
