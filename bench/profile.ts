/**
 * CPU profile of Tessera under one proxy load (issue 15): starts the destination and Tessera
 * with `--cpu-prof`, drives `/proxy` with autocannon, stops Tessera (which writes the profile)
 * and prints the functions with the most self time.
 *
 *   npx tsx bench/profile.ts [tokens=0] [seconds=8] [connections=32] [preconfigured=0]
 *   (preconfigured: 1 both transforms, 2 request transform only, 3 response transform only, 4 none)
 *   BENCH_TESSERA_ENV='{"SVC_AUDIT_ENABLED":"false"}' profiles the same load without the audit log.
 */
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { call, createCardTokens, createPrivateApp } from './lib/api.js'
import { startHelper } from './lib/helpers.js'
import { closedLoop, saturate } from './lib/measure.js'
import { cpuTimeUs, DRIVER_CORE, measureCpu, pinSelf, processTree } from './lib/proc.js'
import { proxyBody } from './proxy.js'
import { createBackend, startTessera } from './lib/tessera.js'

interface ProfileNode { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; children?: number[] }
interface Profile { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[] }

const [tokens = 0, seconds = 8, connections = 32, preconfigured = 0] = process.argv.slice(2).map(Number)
pinSelf()
const dir = mkdtempSync(path.join(os.tmpdir(), 'tessera-prof-'))
const destination = await startHelper('destination', DRIVER_CORE)
const backend = await createBackend(process.env.DATABASE_URL ? 'postgres' : 'pglite', { databaseUrl: process.env.DATABASE_URL, redisUrl: process.env.REDIS_URL })
const tessera = await startTessera(backend, { nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${dir}`] })
try {
  const app = await createPrivateApp(tessera.url, backend.adminKey)
  const ids = tokens > 0 ? await createCardTokens(tessera.url, app.key, tokens) : []
  const headers: Record<string, string> = { 'content-type': 'application/json', 'SVC-API-KEY': app.key, 'SVC-PROXY-URL': `${destination.url}/echo` }
  if (preconfigured) {
    // 1: both transforms, 2: the request transform only, 3: the response transform only, 4: none.
    const res = await call(tessera.url, backend.adminKey, 'POST', '/proxies', {
      name: 'p', destination_url: `${destination.url}/echo`, application: { id: app.id },
      ...(preconfigured === 1 || preconfigured === 2 ? { request_transform: { code: 'module.exports = async function (req) { return { body: req.args.body, headers: req.args.headers } }' } } : {}),
      ...(preconfigured === 1 || preconfigured === 3 ? { response_transform: { code: 'module.exports = async function (req) { return { body: req.args.body, headers: req.args.headers, status: req.args.status } }' } } : {}),
    })
    headers['SVC-PROXY-KEY'] = res.body.key
  }
  const request = { method: 'POST' as const, path: '/proxy', headers, body: proxyBody(ids) }
  await closedLoop(tessera.url, request, { concurrency: connections, durationMs: 2000 })
  const tree = processTree(tessera.pid)
  // PROF_CHILD_CORE=1: the runtime child on the other core (how much sharing one core costs).
  if (process.env.PROF_CHILD_CORE) for (const pid of tree.slice(1)) execFileSync('taskset', ['-a', '-p', '-c', process.env.PROF_CHILD_CORE, String(pid)])
  const before = tree.map(cpuTimeUs)
  const userSys = (pid: number) => readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ').slice(11, 13).map(Number)
  const usBefore = tree.map(userSys)
  const { result, cpuUs } = await measureCpu([tessera.pid], () => saturate([`${tessera.url}/proxy`], request, { connections, durationS: seconds }))
  const each = tree.map((pid, i) => `${i === 0 ? 'api' : `child ${pid}`} ${((cpuTimeUs(pid) - before[i]!) / result.requests).toFixed(1)}`)
  console.log(`${result.rps.toFixed(0)} req/s, ${(cpuUs / result.requests).toFixed(1)} CPU µs/req (${each.join(', ')}), errors ${result.errors}`)
  console.log(`user/sys ticks: ${tree.map((pid, i) => { const [u, s] = userSys(pid); return `${u! - usBefore[i]![0]!}/${s! - usBefore[i]![1]!}` }).join(', ')}; context switches: ${tree.map((pid) => readFileSync(`/proc/${pid}/status`, 'utf8').match(/voluntary_ctxt_switches:\s+(\d+)/)?.[1]).join(', ')}`)
  const lat = await closedLoop(tessera.url, request, { concurrency: 1, requests: 2000 })
  const sorted = [...lat.samplesNs].sort((a, b) => a - b)
  console.log(`c=1 p50 ${(sorted[Math.floor(sorted.length / 2)]! / 1000).toFixed(1)} µs`)
} finally {
  await tessera.stop()
  await destination.stop()
  await backend.drop()
}
for (const file of readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'))) {
  const profile = JSON.parse(readFileSync(path.join(dir, file), 'utf8')) as Profile
  const self = new Map<number, number>()
  profile.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)))
  const byFn = new Map<string, number>()
  const byFile = new Map<string, number>()
  let total = 0
  for (const node of profile.nodes) {
    const t = self.get(node.id) ?? 0
    if (node.callFrame.functionName === '(idle)') continue
    total += t
    const f = node.callFrame
    const where = f.url.replace(/^file:\/\/.*?node_modules\//, '').replace(/^file:\/\/.*?\/dist\//, '')
    const key = `${f.functionName || '(anon)'} ${where}:${f.lineNumber + 1}`
    byFn.set(key, (byFn.get(key) ?? 0) + t)
    const fileKey = where.split('/').slice(0, where.startsWith('@') ? 2 : 1).join('/') || f.functionName
    byFile.set(fileKey, (byFile.get(fileKey) ?? 0) + t)
  }
  console.log(`\n${file}: ${(total / 1e6).toFixed(1)} s busy`)
  for (const [k, v] of [...byFn].sort((a, b) => b[1] - a[1]).slice(0, Number(process.env.PROF_TOP ?? 45))) console.log(`${((v / total) * 100).toFixed(1).padStart(5)}%  ${k}`)
  console.log('\nby package / top folder:')
  for (const [k, v] of [...byFile].sort((a, b) => b[1] - a[1]).slice(0, 25)) console.log(`${((v / total) * 100).toFixed(1).padStart(5)}%  ${k}`)
  console.log(`profile: ${path.join(dir, file)}`)
}
