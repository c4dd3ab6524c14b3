// The first versions of the JSON value walks, kept as oracles: the allocation-free walks that
// replaced them (5 MB bodies cost seconds) must answer exactly as these did, the same first
// problem under the same field name included.
import type { FieldErrors } from '../../../src/errors/index.js'
import { unsafeTextReason } from '../../../src/shapes/unsafe-text.js'

export function firstDepthExceeds(root: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[root, 1]]
  while (stack.length) {
    const [value, depth] = stack.pop()!
    if (value === null || typeof value !== 'object') continue
    if (depth > max) return true
    for (const child of Object.values(value)) stack.push([child, depth + 1])
  }
  return false
}

const NON_FINITE = 'must be a number within the range of a double (about ±1.8e308)'

export function firstFindUnsafeText(root: unknown): FieldErrors | undefined {
  const stack: [unknown, string][] = [[root, '']]
  while (stack.length > 0) {
    const [value, path] = stack.pop()!
    if (typeof value === 'string') {
      const reason = unsafeTextReason(value)
      if (reason !== undefined) return { [path || 'body']: [reason] }
      continue
    }
    if (typeof value === 'number' && !Number.isFinite(value)) return { [path || 'body']: [NON_FINITE] }
    if (value === null || typeof value !== 'object') continue
    if (Array.isArray(value)) {
      value.forEach((item, i) => stack.push([item, `${path}[${i}]`]))
      continue
    }
    for (const [key, item] of Object.entries(value)) {
      const reason = unsafeTextReason(key)
      if (reason !== undefined) return { [path || 'body']: [`has a key that ${reason.replace('must not contain', 'contains')}`] }
      stack.push([item, path === '' ? key : `${path}.${key}`])
    }
  }
  return undefined
}
