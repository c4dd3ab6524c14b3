import { ExpressionError, quoteSnippet } from './expression-error.js'
import { evaluateJsonPath, JsonPathError, parseJsonPath, type PathSegment } from './json-path.js'

/** A filter with its arguments already checked, so rendering never re-validates. */
export type FilterCall =
  | { name: 'json'; position: number; path: PathSegment[] }
  | { name: 'last4'; position: number }
  | { name: 'reveal_last'; position: number; count: number }
  | { name: 'slice'; position: number; start: number; length: number }
  | { name: 'to_string'; position: number }

export type FilterName = FilterCall['name']

export interface FilterArg {
  value: string | number
  position: number
}

export const FILTER_NAMES: readonly FilterName[] = ['json', 'last4', 'reveal_last', 'slice', 'to_string']

/** The character `reveal_last` writes over hidden characters. */
export const MASK_CHAR = 'X'

export function buildFilter(name: string, position: number, args: FilterArg[]): FilterCall {
  switch (name) {
    case 'json': {
      const [arg] = expectArgs(name, position, args, 1, 1)
      const path = stringArg(name, arg as FilterArg)
      try {
        return { name, position, path: parseJsonPath(path) }
      } catch (err) {
        if (!(err instanceof JsonPathError)) throw err
        // +1 skips the opening quote; exact when the literal has no escapes, which paths rarely need.
        throw new ExpressionError((arg as FilterArg).position + 1 + err.offset, `invalid JSONPath: ${err.reason}`)
      }
    }
    case 'last4':
    case 'to_string':
      expectArgs(name, position, args, 0, 0)
      return { name, position }
    case 'reveal_last': {
      const [arg] = expectArgs(name, position, args, 1, 1)
      return { name, position, count: nonNegativeIntArg(name, arg as FilterArg) }
    }
    case 'slice': {
      const [startArg, lengthArg] = expectArgs(name, position, args, 1, 2)
      const start = intArg(name, startArg as FilterArg)
      // Liquid's `slice` defaults the length to 1; the grammar descends from Liquid.
      const length = lengthArg === undefined ? 1 : nonNegativeIntArg(name, lengthArg)
      return { name, position, start, length }
    }
    default:
      throw new ExpressionError(position, `unknown filter ${quoteSnippet(name)}; expected one of ${FILTER_NAMES.join(', ')}`)
  }
}

function expectArgs(name: string, position: number, args: FilterArg[], min: number, max: number): FilterArg[] {
  if (args.length >= min && args.length <= max) return args
  const expected = max === 0 ? 'no arguments' : min === max ? `${min} argument${min === 1 ? '' : 's'}` : `${min} to ${max} arguments`
  throw new ExpressionError(position, `filter '${name}' takes ${expected}, got ${args.length}`)
}

function stringArg(name: string, arg: FilterArg): string {
  if (typeof arg.value !== 'string') throw new ExpressionError(arg.position, `filter '${name}' needs a quoted string argument`)
  return arg.value
}

function intArg(name: string, arg: FilterArg): number {
  if (typeof arg.value !== 'number') throw new ExpressionError(arg.position, `filter '${name}' needs an integer argument`)
  return arg.value
}

function nonNegativeIntArg(name: string, arg: FilterArg): number {
  const n = intArg(name, arg)
  if (n < 0) throw new ExpressionError(arg.position, `filter '${name}' needs a non-negative integer argument`)
  return n
}

/** How any value reads inside text: strings as-is, null as nothing, objects as JSON. */
export function toText(value: unknown): string {
  if (typeof value === 'string') return value
  if (value === null || value === undefined) return ''
  if (typeof value === 'object') return JSON.stringify(value)
  return String(value)
}

export function applyFilter(call: FilterCall, value: unknown): unknown {
  switch (call.name) {
    case 'json':
      return evaluateJsonPath(value, call.path)
    case 'to_string':
      return toText(value)
    case 'last4': {
      const s = scalarText(call, value)
      return s === null ? null : s.slice(-4)
    }
    case 'reveal_last': {
      const s = scalarText(call, value)
      if (s === null || s.length <= call.count) return s
      return MASK_CHAR.repeat(s.length - call.count) + s.slice(s.length - call.count)
    }
    case 'slice':
      return sliceValue(call, value)
  }
}

/** Strings and numbers only: masking an object's JSON text would reveal its structure. */
function scalarText(call: FilterCall, value: unknown): string | null {
  if (typeof value === 'string') return value
  if (typeof value === 'number') return String(value)
  if (value === null || value === undefined) return null
  throw new ExpressionError(call.position, `filter '${call.name}' needs a string or number, got ${typeName(value)}`)
}

function sliceValue(call: Extract<FilterCall, { name: 'slice' }>, value: unknown): unknown {
  if (value === null || value === undefined) return null
  const seq = typeof value === 'number' ? String(value) : value
  if (typeof seq !== 'string' && !Array.isArray(seq)) {
    throw new ExpressionError(call.position, `filter 'slice' needs a string, number or array, got ${typeName(value)}`)
  }
  const from = call.start < 0 ? Math.max(seq.length + call.start, 0) : call.start
  return seq.slice(from, from + call.length)
}

export function typeName(value: unknown): string {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'array'
  return typeof value
}
