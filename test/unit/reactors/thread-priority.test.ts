import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import t from 'tap'

const linux = existsSync('/proc/thread-self')
const helper = new URL('../../../src/reactors/runtime/child/thread-priority.ts', import.meta.url).href

/** Runs `body` as an ES module in a fresh node process (its nice values die with it); returns its JSON output. */
function inProcess(body: string): unknown {
  const source = `
    import { getPriority } from 'node:os'
    import { readdirSync, readFileSync, readlinkSync } from 'node:fs'
    import { lowerThreadPriority } from ${JSON.stringify(helper)}
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop())
    const niceOf = (t) => Number(readFileSync('/proc/self/task/' + t + '/stat', 'utf8').split(') ')[1].split(' ')[16])
    ${body}`
  const out = execFileSync(process.execPath, [`--import=${import.meta.resolve('tsx')}`, '--input-type=module', '-e', source], { encoding: 'utf8' })
  return JSON.parse(out)
}

t.test('lowers only the calling thread, and never raises a lower priority', { skip: linux ? false : 'needs Linux per-thread nice values' }, async (t) => {
  const result = inProcess(`
    const before = getPriority(tid)
    const lowered = lowerThreadPriority(7)
    const after = getPriority(tid)
    const kept = lowerThreadPriority(3)
    const others = readdirSync('/proc/self/task').filter((t) => Number(t) !== tid).map(niceOf)
    console.log(JSON.stringify({ before, lowered, after, kept, afterKept: getPriority(tid), others: [...new Set(others)] }))
  `)
  const { before } = result as { before: number }
  const lowest = Math.max(before, 7)
  t.same(result, { before, lowered: true, after: lowest, kept: true, afterKept: lowest, others: [before] }, "the process's other threads keep their priority")
})
