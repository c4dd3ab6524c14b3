import { holdsPermission } from './access-rules.js'
import type { Principal } from './principal.js'

export type SaverRefusal = 'gone' | 'expired' | 'lacks token:use'

/**
 * Why a Reactor or proxy refuses callers' tokens because of its saver, decided as `withinSaver`
 * and `holds` decide at each call (a management saver holds token:use as its ceiling); undefined
 * when callers' tokens go through within the saver's grants.
 */
export function saverRefusal(saver: Principal | undefined, now = Date.now()): SaverRefusal | undefined {
  if (saver === undefined) return 'gone'
  if (saver.expiresAt !== null && saver.expiresAt.getTime() <= now) return 'expired'
  return holdsPermission(saver.rules, saver.permissions, 'token:use') ? undefined : 'lacks token:use'
}
