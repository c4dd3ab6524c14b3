import { ValidationError } from '../errors/index.js'
import { BACKSLASH, CLOSE_ARRAY, CLOSE_OBJECT, COMMA, OPEN_ARRAY, OPEN_OBJECT, QUOTE } from '../shapes/json-chars.js'

/**
 * Whether JSON text holds more than `max` values, decided before parsing: the parsed form of a
 * body bounded only in bytes grows 20-35 times (`[{},{},…]`), and parsing it and everything after
 * (rendering, canonical JSON, encryption, GC) blocks the event loop for every tenant.
 *
 * In valid JSON a non-empty container's members are one more than its commas, so the values are
 * 1 + commas + non-empty containers: one pass over the bytes (UTF-8 never hides a quote or a
 * bracket inside a multi-byte character), no stack, no allocation. Invalid text gets some count;
 * the parser refuses it anyway.
 */
export function jsonValuesExceed(bytes: Uint8Array, max: number): boolean {
  let values = 1
  let inString = false
  for (let i = 0; i < bytes.length; i++) {
    const c = bytes[i]!
    if (inString) {
      if (c === BACKSLASH) i++
      else if (c === QUOTE) inString = false
      continue
    }
    if (c === QUOTE) inString = true
    else if (c === COMMA || ((c === OPEN_OBJECT || c === OPEN_ARRAY) && !closesNext(bytes, i + 1))) {
      if (++values > max) return true
    }
  }
  return false
}

/** Whether the next byte that is not JSON whitespace closes a container (the one just opened is empty). */
function closesNext(bytes: Uint8Array, from: number): boolean {
  let i = from
  while (i < bytes.length && (bytes[i] === 0x20 || bytes[i] === 0x0a || bytes[i] === 0x0d || bytes[i] === 0x09)) i++
  return bytes[i] === CLOSE_OBJECT || bytes[i] === CLOSE_ARRAY
}

export function tooManyValues(max: number): ValidationError {
  return new ValidationError({ body: [`must hold at most ${max} JSON values`] }, `The JSON body holds more than ${max} values.`)
}
