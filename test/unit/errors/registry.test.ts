import { readFileSync } from 'node:fs'
import t from 'tap'
import { AppError, errorCodes, toProblem, type ErrorCode } from '../../../src/errors/index.js'
import { problemType } from '../../../src/errors/problem.js'

const readme = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8')
const entries = Object.entries(errorCodes) as Array<[ErrorCode, (typeof errorCodes)[ErrorCode]]>

t.test('every registry entry is a client or server error with a problem type and a title', async (t) => {
  for (const [code, entry] of entries) {
    t.match(code, /^[a-z]+(_[a-z]+)*$/, `${code}: snake_case`)
    t.ok(entry.status >= 400 && entry.status <= 599, `${code}: status ${entry.status} is 4xx/5xx`)
    t.equal(problemType(code), `/problems/${code.replaceAll('_', '-')}`, `${code}: problem type URI`)
    t.match(entry.title, /^[A-Z][^\n]{4,}\.$/, `${code}: a one-sentence title`)
    const problem = toProblem(new AppError(code))
    t.same({ type: problem.type, status: problem.status, title: problem.title }, { type: problemType(code), status: entry.status, title: entry.title }, `${code}: rendered from the registry`)
  }
})

t.test('codes, problem types and titles are unique', async (t) => {
  const types = entries.map(([code]) => problemType(code))
  t.equal(new Set(types).size, types.length, 'problem types')
  const titles = entries.map(([, e]) => e.title)
  t.equal(new Set(titles).size, titles.length, 'titles')
})

t.test('the README lists every problem type with its status and title, and no other', async (t) => {
  const section = readme.slice(readme.indexOf('### Problem types'))
  const rows = [...section.matchAll(/^\| `(\/problems\/[a-z-]+)` \| (\d{3}) \| (.+) \|$/gm)].map((m) => [m[1], Number(m[2]), m[3]])
  t.same(rows, entries.map(([code, e]) => [problemType(code), e.status, e.title]))
})
