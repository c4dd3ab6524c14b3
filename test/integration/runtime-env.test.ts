import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import t from 'tap'
import { RUNTIME_ENV_ALLOW_LIST } from '../../src/config/runtime-env.js'
import { startTestApp } from '../helpers/app.js'

// What Node's fork() adds for the IPC channel itself.
const NODE_IPC = new Set(['NODE_CHANNEL_FD', 'NODE_CHANNEL_SERIALIZATION_MODE', 'NODE_UNIQUE_ID'])

/** tap's process-info hook adds its own variables to every process a test forks; production has none. */
function addedByTap(name: string, value: string | undefined): boolean {
  if (name.startsWith('_TAPJS_')) return true
  return name === 'NODE_OPTIONS' && value !== undefined && value.split(/\s+/).every((option) => option === '' || option.includes('@tapjs/processinfo'))
}

function environOf(pid: number): Map<string, string> {
  const env = new Map<string, string>()
  for (const entry of readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0')) {
    if (entry === '') continue
    const at = entry.indexOf('=')
    env.set(entry.slice(0, at), entry.slice(at + 1))
  }
  return env
}

t.test('the Reactor runtime child holds none of the API process secrets', { skip: process.platform !== 'linux' && 'reads /proc' }, async (t) => {
  const secrets: Record<string, string> = {
    SVC_OPERATOR_KEY: `operator-${randomBytes(24).toString('hex')}`,
    // Also in the API process's own environment, as in production: the child must not inherit it.
    SVC_MASTER_KEY: `k1:${randomBytes(32).toString('base64')}`,
    SVC_KEY_HASH_SECRET: randomBytes(32).toString('hex'),
    SVC_BOOTSTRAP_API_KEY: `key_${randomBytes(24).toString('hex')}`,
    SVC_SOME_FUTURE_SECRET: randomBytes(16).toString('hex'),
  }
  if (!process.env.DATABASE_URL) secrets.DATABASE_URL = 'postgres://tessera:not-a-real-password@127.0.0.1:1/none'
  if (!process.env.REDIS_URL) secrets.REDIS_URL = 'redis://:not-a-real-password@127.0.0.1:1'
  const appEnv = { SVC_OPERATOR_KEY: secrets.SVC_OPERATOR_KEY!, SVC_MASTER_KEY: secrets.SVC_MASTER_KEY!, SVC_KEY_HASH_SECRET: secrets.SVC_KEY_HASH_SECRET!, SVC_BOOTSTRAP_API_KEY: secrets.SVC_BOOTSTRAP_API_KEY!, TZ: 'Europe/Zurich' }
  const app = await startTestApp(t, appEnv)
  // Set only now (the app under test reads DATABASE_URL/REDIS_URL from here), before the child is forked.
  const saved = { ...process.env }
  Object.assign(process.env, secrets)
  t.teardown(() => {
    for (const name of Object.keys(secrets)) delete process.env[name]
    Object.assign(process.env, saved)
  })
  await app.services.supervisor.start()
  const pid = app.services.supervisor.pid
  if (pid === undefined) throw new Error('the runtime child did not start')
  const env = environOf(pid)

  const leaked = [...env.keys()].filter((name) => !RUNTIME_ENV_ALLOW_LIST.includes(name) && !NODE_IPC.has(name) && !addedByTap(name, env.get(name)))
  t.same(leaked, [], `only allow-listed variables (${[...env.keys()].join(', ')})`)
  const values = [...Object.values(secrets), process.env.DATABASE_URL, process.env.REDIS_URL, app.config.keyHashSecret, app.config.masterKey].filter((v): v is string => !!v)
  const raw = readFileSync(`/proc/${pid}/environ`, 'utf8')
  for (const value of values) t.notOk(raw.includes(value), `no secret value (${value.slice(0, 6)}...)`)
  t.equal(env.get('TZ'), 'Europe/Zurich', 'the time zone is passed on')

  // The child still works with nothing else.
  const admin = secrets.SVC_BOOTSTRAP_API_KEY
  const reactor = await app.request('POST', '/reactors', { key: admin, body: { name: 'echo', code: 'module.exports = async (req) => ({ raw: req.args })' } })
  t.equal(reactor.status, 201)
  const caller = (await app.request('POST', '/applications', { key: admin, body: { name: 'caller', type: 'private', permissions: ['token:use'] } })).body.key as string
  const res = await app.request('POST', `/reactors/${reactor.body.id}/react`, { key: caller, body: { args: { x: 1 } } })
  t.equal(res.status, 200)
  t.same(res.body.raw, { x: 1 })
})
