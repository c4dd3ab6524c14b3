/**
 * Processes under test: CPU pinning with `taskset` and CPU time read from `/proc/<pid>/stat`.
 * The process under test runs alone on core 0; the bench driver (load generator, latency
 * client) and the destination share core 1, so the two never steal each other's cycles.
 */
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { readdirSync, readFileSync } from 'node:fs'
import os from 'node:os'
import { median, round1 } from './measure.js'

export const SUT_CORE = 0
export const DRIVER_CORE = 1

let tasksetChecked: boolean | undefined
/** True when `taskset` runs and the machine has at least two cores. */
export function canPin(): boolean {
  if (tasksetChecked === undefined) {
    tasksetChecked = os.cpus().length >= 2 && spawnSync('taskset', ['--version'], { stdio: 'ignore' }).status === 0
  }
  return tasksetChecked
}

/** Moves the bench driver itself (every thread) to the driver core; children inherit it. */
export function pinSelf(): string {
  if (!canPin()) return 'not pinned (taskset missing or fewer than 2 cores)'
  return pinThisProcess(DRIVER_CORE) ? `driver pinned to core ${DRIVER_CORE}, processes under test to core ${SUT_CORE}` : 'not pinned (taskset -p failed)'
}

/** Pins every thread of this process (and what it forks later) to `core`; false if taskset failed. */
export function pinThisProcess(core: number): boolean {
  return spawnSync('taskset', ['-a', '-p', '-c', String(core), String(process.pid)], { stdio: 'ignore' }).status === 0
}

export interface SpawnOptions {
  /** Core to pin to; undefined: inherit the driver's affinity. */
  core?: number
  env?: NodeJS.ProcessEnv
  cwd?: string
  /** Open stdin as a pipe (default: ignored). */
  stdin?: boolean
}

/** Spawns `node <args>` (under `taskset -c <core>` when possible: taskset execs, so the pid is node's). */
export function spawnNode(args: string[], options: SpawnOptions = {}): ChildProcess {
  const cmd = options.core !== undefined && canPin() ? ['taskset', '-c', String(options.core), process.execPath] : [process.execPath]
  const child = spawn(cmd[0]!, [...cmd.slice(1), ...args], { env: options.env ?? process.env, cwd: options.cwd, stdio: [options.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'] })
  children.add(child)
  child.once('exit', () => children.delete(child))
  return child
}

/** Keeps the last few KB of a child's output for error messages. */
export function captureOutput(child: ChildProcess): () => string {
  let out = ''
  const keep = (chunk: Buffer) => {
    out = (out + chunk.toString()).slice(-4000)
  }
  child.stdout?.on('data', keep)
  child.stderr?.on('data', keep)
  return () => out
}

/** SIGTERM, then SIGKILL after `graceMs`. */
export async function stopChild(child: ChildProcess, graceMs = 5000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return
  const exited = once(child, 'exit')
  child.kill('SIGTERM')
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs)
  await exited
  clearTimeout(timer)
}

const children = new Set<ChildProcess>()
// A crashed or interrupted bench must not leave servers behind.
process.once('exit', () => {
  for (const c of children) c.kill('SIGKILL')
})
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    for (const c of children) c.kill('SIGKILL')
    process.exit(130)
  })
}

let clkTck: number | undefined
function ticksPerSecond(): number {
  if (clkTck === undefined) {
    try {
      clkTck = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100
    } catch {
      clkTck = 100
    }
  }
  return clkTck
}

/** utime + stime of a process (all its threads), in microseconds. */
export function cpuTimeUs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  // The command name may contain spaces and parentheses: fields are counted after the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  const ticks = Number(fields[11]) + Number(fields[12])
  return (ticks * 1e6) / ticksPerSecond()
}

/** CPU of `fn` in the given processes and their descendants (Tessera's Reactor runtime child), in microseconds. */
export function measureCpu<T>(pids: number[], fn: () => Promise<T>): Promise<{ result: T; cpuUs: number }> {
  return measureCpuOf(pids.flatMap(processTree), fn)
}

const STORE_COMMANDS = new Set(['postgres', 'redis-server'])

/** The Postgres and Redis server processes on this machine (none without /proc). */
export function localStorePids(): number[] {
  let pids: string[]
  try {
    pids = readdirSync('/proc').filter((name) => /^\d+$/.test(name))
  } catch {
    return []
  }
  return pids.map(Number).filter((pid) => {
    try {
      return STORE_COMMANDS.has(readFileSync(`/proc/${pid}/comm`, 'utf8').trim())
    } catch {
      return false
    }
  })
}
/** CPU of exactly `pids` over `fn`, in microseconds; a process missing at either reading counts nothing. */
export async function measureCpuOf<T>(pids: number[], fn: () => Promise<T>): Promise<{ result: T; cpuUs: number }> {
  const read = (pid: number) => {
    try {
      return cpuTimeUs(pid)
    } catch {
      return undefined
    }
  }
  const before = pids.map(read)
  const result = await fn()
  const cpuUs = pids.reduce((sum, pid, i) => {
    const [from, to] = [before[i], read(pid)]
    return from === undefined || to === undefined ? sum : sum + to - from
  }, 0)
  return { result, cpuUs }
}

/** A process and its descendants, found through /proc (just the process where there is none). */
export function processTree(pid: number): number[] {
  const out = [pid]
  for (let i = 0; i < out.length; i++) {
    try {
      for (const tid of readdirSync(`/proc/${out[i]}/task`)) {
        const children = readFileSync(`/proc/${out[i]}/task/${tid}/children`, 'utf8').trim()
        if (children) out.push(...children.split(/\s+/).map(Number))
      }
    } catch {
      // Gone, or no /proc: CPU then covers what was found.
    }
  }
  return out
}

/** Load average is recorded because other work on a shared machine skews every figure. */
export interface MachineInfo {
  cpu: string
  cores: number
  node: string
  os: string
  memoryGb: number
  loadAverage: number[]
}

export function machineInfo(): MachineInfo {
  return {
    loadAverage: os.loadavg().map((l) => Math.round(l * 100) / 100),
    cpu: os.cpus()[0]?.model.trim() ?? 'unknown',
    cores: os.cpus().length,
    node: process.version,
    os: `${os.type()} ${os.release()}`,
    memoryGb: Math.round(os.totalmem() / 2 ** 30),
  }
}

/** What the idle probe saw: the same short computation, back to back and right after the core idled. */
export interface IdleProbe {
  /** Median µs of the computation run back to back (the core never idles). */
  busyUs: number
  /** Median µs of the same computation, each run after 1 ms of sleep. */
  afterIdleUs: number
}

/**
 * How much slower this machine runs code right after a short idle: on some VMs an idle vCPU
 * comes back with cold caches (or is descheduled), and everything timed at concurrency 1 (each
 * request follows an idle gap while the client reads the answer) pays that factor on every
 * step. Recorded beside the c=1 latencies so figures from different hosts can be read.
 */
export async function idleProbe(samples = 500): Promise<IdleProbe> {
  const payload = { id: 'a3bb189e-8bf9-3888-9912-ace4e6543002', items: Array.from({ length: 16 }, (_, i) => ({ n: i, name: `item-${i}`, price: i * 1.5 })) }
  // About 10 µs: short, like each step of a request (a long computation warms its own caches).
  const time = (): number => {
    const t0 = process.hrtime.bigint()
    if ((JSON.parse(JSON.stringify(payload)) as { items: unknown[] }).items.length !== 16) throw new Error('unreachable')
    return Number(process.hrtime.bigint() - t0) / 1000
  }
  for (let i = 0; i < 2000; i++) time()
  const busy = Array.from({ length: samples }, time)
  const afterIdle: number[] = []
  for (let i = 0; i < samples; i++) {
    await new Promise((r) => setTimeout(r, 1))
    afterIdle.push(time())
  }
  return { busyUs: round1(median(busy)), afterIdleUs: round1(median(afterIdle)) }
}
