import t, { type Test } from 'tap'
import { startTestApp, type TestApp, type TestResponse } from '../helpers/app.js'

// A narrow management key changes an Application while a wider key widens it. The decision
// must read the row the write replaces: when the widening commits first, the narrow key is
// refused (403) and the Application stays wide, as in every serial order where it comes second.
// Each case forces that interleaving instead of hoping for it.

const narrowRules = [{ priority: 1, container: '/general/', transform: 'mask', permissions: ['token:read'] }]
const wideRules = [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:read'] }]

interface Target {
  id: string
  /** An extra key the admin minted, for the key-delete case. */
  keyId: string
}

interface Case {
  name: string
  send(app: TestApp, narrowKey: string, target: Target): Promise<TestResponse>
  /** What must still hold after the refusal, besides the Application being wide. */
  unchanged?(t: Test, app: TestApp, target: Target): Promise<void>
}

const cases: Case[] = [
  {
    name: 'PUT with its own narrow rules',
    send: (app, key, target) => app.request('PUT', `/applications/${target.id}`, { key, body: { name: 'renamed by narrow', rules: narrowRules } }),
  },
  {
    name: 'DELETE',
    send: (app, key, target) => app.request('DELETE', `/applications/${target.id}`, { key }),
  },
  {
    name: 'regenerate',
    send: (app, key, target) => app.request('POST', `/applications/${target.id}/regenerate`, { key }),
  },
  {
    name: 'key create',
    send: (app, key, target) => app.request('POST', `/applications/${target.id}/keys`, { key }),
    async unchanged(t, app, target) {
      const keys = await app.request('GET', `/applications/${target.id}/keys`)
      t.equal(keys.body.length, 1, 'no key was minted')
    },
  },
  {
    name: 'key delete',
    send: (app, key, target) => app.request('DELETE', `/applications/${target.id}/keys/${target.keyId}`, { key }),
    async unchanged(t, app, target) {
      t.equal((await app.request('GET', `/applications/${target.id}/keys/${target.keyId}`)).status, 200, 'the key is still there')
    },
  },
]

async function setUp(t: Test): Promise<{ app: TestApp; narrowKey: string; newTarget(): Promise<Target> }> {
  const app = await startTestApp(t)
  const permissions = ['application:read', 'application:update', 'application:delete']
  const mgr = await app.request('POST', '/applications', { body: { name: 'narrow manager', type: 'management', permissions, rules: narrowRules } })
  t.equal(mgr.status, 201, 'the narrow manager is created')
  return {
    app,
    narrowKey: mgr.body.key,
    async newTarget() {
      const target = await app.request('POST', '/applications', { body: { name: 'target', type: 'private', rules: narrowRules } })
      t.equal(target.status, 201, 'the target is created')
      const key = await app.request('POST', `/applications/${target.body.id}/keys`)
      t.equal(key.status, 201, 'with an extra key')
      return { id: target.body.id, keyId: key.body.id }
    },
  }
}

async function checkRefused(t: Test, app: TestApp, target: Target, answer: TestResponse, c: Case): Promise<void> {
  t.equal(answer.status, 403, 'the narrow key is refused')
  t.ok(answer.body?.errors?.id, 'the refusal names the Application')
  const after = await app.request('GET', `/applications/${target.id}`)
  t.equal(after.status, 200, 'the Application is still there')
  t.same(after.body.rules, wideRules, 'and still wide')
  t.equal(after.body.name, 'target')
  await c.unchanged?.(t, app, target)
}

// The narrow key's request reads the Application (its lookup) before the widening commits;
// a hook on the lookup commits the widening right after, before the request writes. Runs on
// both backends (PGlite runs one query at a time, so a held row lock would stall everything).
t.test('the widening commits between the narrow key\'s lookup and its write', async (t) => {
  const { app, narrowKey, newTarget } = await setUp(t)
  const applications = app.services.store.applications
  const findById = applications.findById
  t.teardown(() => {
    applications.findById = findById
  })
  for (const c of cases) {
    await t.test(c.name, async (t) => {
      const target = await newTarget()
      let armed = true
      let widened: TestResponse | undefined
      applications.findById = async (tenantId, id) => {
        const row = await findById(tenantId, id)
        if (id === target.id && armed) {
          armed = false
          widened = await app.request('PUT', `/applications/${target.id}`, { body: { name: 'target', rules: wideRules } })
        }
        return row
      }
      const answer = await c.send(app, narrowKey, target)
      applications.findById = findById
      t.equal(widened?.status, 200, 'the widening ran during the narrow key\'s request and succeeded')
      await checkRefused(t, app, target, answer, c)
    })
  }
})

// Black-box: a second transaction holds the row lock, so the narrow key's request reads the
// Application and then waits for the lock; the widening commits in that transaction once the
// request is seen waiting on it (pg_blocking_pids), so no timing is assumed.
t.test('the widening holds the row lock while the narrow key\'s request waits', { skip: process.env.DATABASE_URL ? false : 'needs DATABASE_URL (PGlite runs one query at a time)' }, async (t) => {
  const { app, narrowKey, newTarget } = await setUp(t)
  const knex = app.services.store.db.knex
  for (const c of cases) {
    await t.test(c.name, async (t) => {
      const target = await newTarget()
      const holder = await knex.transaction()
      t.teardown(() => (holder.isCompleted() ? undefined : holder.rollback()))
      await holder('applications').where({ id: target.id }).forUpdate().first('id')
      const { rows } = await holder.raw<{ rows: { pid: number }[] }>('select pg_backend_pid() as pid')
      const holderPid = rows[0]!.pid
      let settled = false
      const pending = c.send(app, narrowKey, target).finally(() => {
        settled = true
      })
      for (let waiting = 0; waiting === 0 && !settled; ) {
        const blocked = await knex.raw<{ rows: { n: number }[] }>('select count(*)::int as n from pg_stat_activity where ? = any(pg_blocking_pids(pid))', [holderPid])
        waiting = blocked.rows[0]!.n
        if (waiting === 0) await new Promise((resolve) => setTimeout(resolve, 5))
      }
      await holder('applications').where({ id: target.id }).update({ rules: JSON.stringify(wideRules) })
      await holder.commit()
      await checkRefused(t, app, target, await pending, c)
    })
  }
})
