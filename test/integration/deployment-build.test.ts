import { execFile, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { promisify } from 'node:util'
import { DockerfileParser } from 'dockerfile-ast'
import t from 'tap'
import { processStorage } from '../helpers/cli.js'

/**
 * What the container image runs, run here without a container: the Dockerfile's own build
 * command, then its CMD on the compiled copy (migrations, the operator CLI and the Reactor
 * runtime child all from dist/, as in the image), checked by the image's own HEALTHCHECK.
 * A path that only the compiled copy takes (the runtime child's entry, the migrations) breaks
 * here before it breaks an image.
 */
t.setTimeout(400_000)
const run = promisify(execFile)
const dockerfile = DockerfileParser.parse(readFileSync('Dockerfile', 'utf8'))
const instructions = dockerfile.getInstructions()
const jsonArgs = (keyword: string) => JSON.parse(instructions.filter((i) => i.getKeyword() === keyword).at(-1)!.getArgumentsContent()!.replace(/^.*?CMD\s+/s, '')) as string[]
const KEY = `tsr_mgmt_${randomBytes(32).toString('hex').slice(0, 43)}`


t.test('the image\'s build and CMD: a server that is healthy, migrates, and runs a Reactor from the compiled copy', async (t) => {
  const build = instructions.filter((i) => i.getKeyword() === 'RUN').map((i) => i.getArgumentsContent() ?? '').find((r) => r.includes('npm run build'))
  t.ok(build, 'the Dockerfile builds with npm run build')
  await run('npm', ['run', '-s', 'build'], { timeout: 300_000 })

  const [command, ...args] = jsonArgs('CMD')
  t.equal(command, 'node')
  const env = { PATH: process.env.PATH ?? '', PORT: '0', HOST: '127.0.0.1', SVC_BOOTSTRAP_API_KEY: KEY, SVC_KEY_HASH_SECRET: randomBytes(32).toString('hex'), SVC_MASTER_KEY: `k1:${randomBytes(32).toString('base64')}`, ...(await processStorage(t, 'image', {})), ...(process.env.DATABASE_URL && process.env.REDIS_URL ? { REDIS_URL: process.env.REDIS_URL } : {}) }
  const child = spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'pipe'] })
  t.teardown(() => child.kill('SIGKILL'))
  let out = ''
  let err = ''
  child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()))
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString()
      const m = /"port":(\d+)/.exec(out)
      if (m) resolve(Number(m[1]))
    })
    void exited.then(() => reject(new Error(`the server exited: ${out} ${err}`)))
  })
  const base = `http://127.0.0.1:${port}`

  const [healthNode, ...healthArgs] = jsonArgs('HEALTHCHECK')
  t.equal(healthNode, 'node')
  await t.resolves(run(process.execPath, healthArgs, { env: { PATH: env.PATH, PORT: String(port) } }), 'the HEALTHCHECK passes (/readyz)')

  const call = async (method: string, url: string, key: string, body?: unknown) => {
    const res = await fetch(`${base}${url}`, { method, headers: { 'SVC-API-KEY': key, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) })
    return { status: res.status, body: (await res.json()) as Record<string, unknown> }
  }
  const reactor = await call('POST', '/reactors', KEY, { name: 'image', code: 'module.exports = async (req) => ({ raw: req.args.a + 1 })' })
  t.equal(reactor.status, 201, 'code compiled by the runtime child from dist/')
  const caller = await call('POST', '/applications', KEY, { name: 'caller', type: 'private', permissions: ['token:use'] })
  const reacted = await call('POST', `/reactors/${reactor.body.id}/react`, caller.body.key as string, { args: { a: 41 } })
  t.same([reacted.status, reacted.body.raw], [200, 42], 'and run there')

  const cli = await run(process.execPath, ['dist/src/cli/main.js', '--version'])
  t.equal(cli.stdout.trim(), JSON.parse(readFileSync('package.json', 'utf8')).version, 'the image\'s `tessera` (dist/src/cli/main.js) runs')

  child.kill('SIGTERM')
  t.equal(await exited, 0, 'SIGTERM: a clean exit')
})
