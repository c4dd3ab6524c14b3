const OBJECT_BYTES = 40
const SLOT_BYTES = 16
const MAX_DEPTH = 8

/**
 * A cheap over-estimate of the heap a value of plain data holds (strings as UTF-16, buffers by
 * length, objects and arrays by slot), for the byte bound of a cache. Shared objects are counted
 * each time they are reached (an over-estimate); functions and class instances other than
 * Date and Buffer count as one slot: size such entries with a `sizeOf` of their own.
 */
export function approximateBytes(value: unknown, depth = 0): number {
  if (typeof value === 'string') return 16 + value.length * 2
  if (value === null || typeof value !== 'object') return SLOT_BYTES
  if (Buffer.isBuffer(value) || value instanceof Uint8Array) return OBJECT_BYTES + value.byteLength
  if (value instanceof Date) return OBJECT_BYTES
  if (depth >= MAX_DEPTH) return OBJECT_BYTES
  let total = OBJECT_BYTES
  if (Array.isArray(value)) {
    for (const item of value) total += SLOT_BYTES + approximateBytes(item, depth + 1)
    return total
  }
  const proto = Object.getPrototypeOf(value) as unknown
  if (proto !== Object.prototype && proto !== null) return SLOT_BYTES
  for (const [key, item] of Object.entries(value)) total += SLOT_BYTES + key.length * 2 + approximateBytes(item, depth + 1)
  return total
}
