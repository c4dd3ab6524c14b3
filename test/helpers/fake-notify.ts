import type { Logger } from 'pino'
import { pino } from 'pino'
import { createInvalidationBus, type InvalidationBus } from '../../src/cache/invalidation-bus.js'
import type { Database, ListenerState } from '../../src/store/database.js'

export interface FakeProcess {
  bus: InvalidationBus
  /** The process's listener connection goes (`lost`) or comes back (`restored`). */
  listener(state: ListenerState): void
}

/**
 * Postgres LISTEN/NOTIFY shared by several in-memory "processes": a NOTIFY reaches every
 * listening process, the sender included, unless that process's listener is lost.
 */
export function fakeNotify(): { process(): FakeProcess; failNotify: boolean; sent: number } {
  const processes: { handlers: Map<string, ((payload: string) => void)[]>; listening: boolean }[] = []
  const logger: Logger = pino({ level: 'silent' })
  const shared = {
    failNotify: false,
    sent: 0,
    process(): FakeProcess {
      const proc = { handlers: new Map<string, ((payload: string) => void)[]>(), listening: true }
      processes.push(proc)
      const stateHandlers: ((state: ListenerState) => void)[] = []
      const db = {
        kind: 'postgres',
        async listen(channel: string, fn: (payload: string) => void) {
          proc.handlers.set(channel, [...(proc.handlers.get(channel) ?? []), fn])
        },
        async notify(channel: string, payloads: readonly string[]) {
          if (shared.failNotify) throw new Error('Query read timeout')
          shared.sent++
          for (const payload of payloads) for (const p of processes) if (p.listening) p.handlers.get(channel)?.forEach((h) => h(payload))
        },
        onListenerState: (fn: (state: ListenerState) => void) => void stateHandlers.push(fn),
      } as unknown as Database
      return {
        bus: createInvalidationBus(db, logger),
        listener(state) {
          proc.listening = state === 'restored'
          stateHandlers.forEach((fn) => fn(state))
        },
      }
    },
  }
  return shared
}
