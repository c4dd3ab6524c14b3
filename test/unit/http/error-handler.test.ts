import type { AddressInfo } from 'node:net'
import Koa from 'koa'
import type { Logger } from 'pino'
import t from 'tap'
import { AppError, type ErrorCode } from '../../../src/errors/index.js'
import { errorHandler } from '../../../src/http/middleware/error-handler.js'
import type { AppState } from '../../../src/http/context.js'

t.test('5xx a caller or its tenant\'s code brings about are warnings; Tessera\'s own failures errors', async (t) => {
  let level: string | undefined
  const record = (name: string) => () => void (level = name)
  const logger = { error: record('error'), warn: record('warn') } as unknown as Logger
  const app = new Koa<AppState>()
  app.use(errorHandler(logger))
  app.use((ctx) => {
    const code = ctx.path.slice(1)
    throw code === 'thrown' ? new Error('a bug') : new AppError(code as ErrorCode)
  })
  const server = app.listen(0, '127.0.0.1')
  t.teardown(() => void server.close())
  await new Promise((resolve) => server.once('listening', resolve))
  const levelFor = async (code: string) => {
    level = undefined
    await (await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/${code}`)).arrayBuffer()
    return level
  }
  for (const code of ['destination_unreachable', 'destination_timeout', 'reactor_error', 'reactor_timeout', 'reactor_overloaded']) t.equal(await levelFor(code), 'warn', code)
  for (const code of ['internal', 'unavailable', 'thrown']) t.equal(await levelFor(code), 'error', code)
  t.equal(await levelFor('not_found'), undefined, '4xx are not logged here')
})
