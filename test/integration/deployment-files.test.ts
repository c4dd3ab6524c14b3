import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { promisify } from 'node:util'
import { Copy, DockerfileParser, type Instruction } from 'dockerfile-ast'
import t from 'tap'
import { parse as parseYaml } from 'yaml'
import { loadConfig } from '../../src/config/index.js'
import { configSchema } from '../../src/config/schema.js'
import { startTestApp } from '../helpers/app.js'

/**
 * The Dockerfile and compose.yaml cannot be built here (no container daemon): what can be checked
 * is that they parse, hold what a deployment needs, and use the commands the README documents.
 */
const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: Record<string, string> }
const readme = readFileSync('README.md', 'utf8')
const dockerfile = DockerfileParser.parse(readFileSync('Dockerfile', 'utf8'))
const jsonArgs = (i: Instruction | undefined) => JSON.parse(i?.getArgumentsContent() ?? 'null') as string[]

t.test('Dockerfile: multi-stage, built and started with the README\'s commands, non-root, health check on /readyz', async (t) => {
  const froms = dockerfile.getFROMs()
  t.ok(froms.length >= 2, 'multi-stage')
  t.equal(froms[0]!.getBuildStage(), 'build')
  const instructions = dockerfile.getInstructions()
  const runtime = instructions.slice(instructions.indexOf(froms.at(-1)!))
  const build = instructions.slice(0, instructions.indexOf(froms.at(-1)!))
  const runs = build.filter((i) => i.getKeyword() === 'RUN').map((i) => i.getArgumentsContent() ?? '')
  t.ok(runs.some((r) => /\bnpm ci\b/.test(r)), 'installs with npm ci')
  t.ok(runs.some((r) => /\bnpm run build\b/.test(r)), 'builds with npm run build')
  t.ok(runtime.some((i) => i instanceof Copy && i.getFromFlag()?.getValue() === 'build'), 'the runtime stage copies the build')
  const user = runtime.filter((i) => i.getKeyword() === 'USER').at(-1)?.getArgumentsContent()
  t.ok(user && user !== 'root' && user !== '0', `runs as ${user}`)
  t.same(jsonArgs(runtime.find((i) => i.getKeyword() === 'CMD')), pkg.scripts.serve!.split(' '), 'CMD is `npm run serve` (the start command after the build)')
  t.ok(readme.includes('npm run serve'), 'the README documents that command')
  t.match(runtime.find((i) => i.getKeyword() === 'ENV')?.getArgumentsContent(), /HOST=0\.0\.0\.0/, 'listens beyond loopback')
  const health = runtime.find((i) => i.getKeyword() === 'HEALTHCHECK')
  t.match(health?.getArgumentsContent(), /\/readyz/)

  // The health check's own command, run against a real server.
  const command = JSON.parse(health!.getArgumentsContent()!.replace(/^.*?CMD\s+/s, '')) as string[]
  t.equal(command[0], 'node')
  const app = await startTestApp(t)
  const run = promisify(execFile)
  const port = new URL(app.url).port
  await t.resolves(run(process.execPath, command.slice(1), { env: { ...process.env, PORT: port } }), 'healthy: exit 0')
  await app.close()
  await t.rejects(run(process.execPath, command.slice(1), { env: { ...process.env, PORT: port } }), { code: 1 }, 'unhealthy: exit 1')
})

t.test('compose.yaml: Tessera on Postgres and Redis, waiting for both', async (t) => {
  const compose = parseYaml(readFileSync('compose.yaml', 'utf8')) as { services: Record<string, any>; volumes: Record<string, unknown> } // eslint-disable-line @typescript-eslint/no-explicit-any -- parsed YAML
  t.same(Object.keys(compose.services).sort(), ['postgres', 'redis', 'tessera'])
  const tessera = compose.services.tessera
  t.equal(tessera.build, '.', 'built from this Dockerfile')
  t.match(tessera.environment.DATABASE_URL, /^postgres:\/\/[^@]+@postgres:5432\//)
  t.match(tessera.environment.REDIS_URL, /^redis:\/\/redis:6379/)
  const known = new Set(Object.keys(configSchema.properties))
  for (const name of Object.keys(tessera.environment)) t.ok(known.has(name), `${name} is a variable Tessera reads`)
  for (const secret of ['SVC_MASTER_KEY', 'SVC_KEY_HASH_SECRET']) t.match(tessera.environment[secret], /^\$\{\w+:\?/, `${secret} must be given, never defaulted`)
  t.same(tessera.depends_on, { postgres: { condition: 'service_healthy' }, redis: { condition: 'service_healthy' } })
  t.ok(compose.services.postgres.healthcheck.test.includes('pg_isready'))
  t.ok(compose.services.redis.healthcheck.test.includes('ping'))
  t.ok('pgdata' in compose.volumes)
  t.ok(readme.includes('docker compose up'), 'the README says how to start it')

  // With the .env the README's printf line writes, compose's substitutions give a configuration Tessera accepts.
  const dotenv: Record<string, string> = { POSTGRES_PASSWORD: randomBytes(16).toString('hex'), SVC_MASTER_KEY: `k1:${randomBytes(32).toString('base64')}`, SVC_KEY_HASH_SECRET: randomBytes(32).toString('hex') }
  const substitute = (value: string) => value.replace(/\$\{(\w+)(?::([?-])([^}]*))?\}/g, (_all, name: string, kind?: string, rest?: string) => dotenv[name] ?? (kind === '-' ? (rest ?? '') : ''))
  const environment = Object.fromEntries(Object.entries(tessera.environment as Record<string, string>).map(([name, value]) => [name, substitute(value)]))
  const config = loadConfig(environment)
  t.equal(config.databaseUrl, `postgres://tessera:${dotenv.POSTGRES_PASSWORD}@postgres:5432/tessera`)
  t.same([config.bootstrapApiKey, config.operatorKey], [undefined, undefined], 'optional keys left empty are unset, not invalid')
  for (const name of Object.keys(dotenv)) t.ok(readme.includes(`${name}=`), `the README's .env line sets ${name}`)
})
