import { AppError } from '../../../errors/index.js'
import { ExpressionError, parseTemplate, renderTemplate, type Template, type TokenLookup } from '../../../expressions/index.js'
import type { TokenBudget } from './token-budget.js'
import { BACKSLASH, CLOSE_ARRAY, CLOSE_OBJECT, COMMA, OPEN_ARRAY, OPEN_OBJECT, QUOTE } from '../../../shapes/json-chars.js'

interface Frame {
  array: boolean
  index: number
  /** The current key as its raw JSON literal; decoded only when a pointer is needed. */
  rawKey: string
}

/** A string value holding expressions: `start`/`end` span its literal, quotes included. */
interface Site {
  start: number
  end: number
  template: Template
}

/**
 * Expressions in a JSON body, substituted in the text rather than by parse + serialize: every
 * byte outside the substituted string literals is forwarded as sent (number spelling and
 * precision, key order, duplicate keys, whitespace). A literal that is exactly one expression is
 * replaced by the data's JSON, so it takes the data's type. Keys are never evaluated.
 * Returns null when no value holds an expression.
 */
export function planJson(text: string, budget: TokenBudget): ((lookup: TokenLookup) => string) | null {
  assertJson(text)
  const sites = findSites(text, budget)
  if (sites.length === 0) return null
  return (lookup) => {
    let out = ''
    let last = 0
    for (const site of sites) {
      let value: unknown
      try {
        value = renderTemplate(site.template, lookup, 'value')
      } catch (err) {
        throw err instanceof ExpressionError ? err.at(pointerTo(text, site.start)) : err
      }
      out += text.slice(last, site.start) + JSON.stringify(value)
      last = site.end
    }
    return out + text.slice(last)
  }
}

// The scanner below trusts the text to be JSON; this is what makes that safe.
function assertJson(text: string): void {
  try {
    JSON.parse(text)
  } catch (cause) {
    // V8's message quotes the input, which may be sensitive: keep only the position.
    const position = cause instanceof SyntaxError ? /position (\d+)/.exec(cause.message)?.[1] : undefined
    const where = position === undefined ? '' : ` (syntax error at position ${position})`
    throw new AppError('bad_request', { detail: `The body is declared JSON but is not valid JSON${where}.`, cause })
  }
}

/**
 * One pass over valid JSON: `onString` gets every string literal (`start`/`end` span it, quotes
 * included) with the frames above it, and whether it is a key; the pass stops when it answers false.
 */
function scan(text: string, onString: (start: number, end: number, stack: readonly Frame[], isKey: boolean) => boolean): void {
  const stack: Frame[] = []
  let expectKey = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === QUOTE) {
      const end = closingQuote(text, i)
      const top = stack[stack.length - 1]
      const isKey = expectKey && top !== undefined
      if (isKey) {
        top.rawKey = text.slice(i, end + 1)
        expectKey = false
      }
      if (!onString(i, end + 1, stack, isKey)) return
      i = end
    } else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      stack.push({ array: c === OPEN_ARRAY, index: 0, rawKey: '' })
      expectKey = c === OPEN_OBJECT
    } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
      stack.pop()
      expectKey = false
    } else if (c === COMMA) {
      const top = stack[stack.length - 1]
      if (top?.array) top.index++
      else expectKey = true
    }
  }
}

/**
 * The value strings holding expressions; stops as soon as no `{{` lies ahead (in JSON it can only
 * sit in a string). A site keeps no path: copying the frames for each one cost depth x sites (a
 * 456 KB body 200,000 levels deep with 4,000 sites ran the process out of memory).
 */
function findSites(text: string, budget: TokenBudget): Site[] {
  const sites: Site[] = []
  let next = text.indexOf('{{')
  if (next !== -1) {
    scan(text, (start, end, stack, isKey) => {
      if (next >= end) return true
      if (!isKey) sites.push(compileSite(text, start, end, stack, budget))
      next = text.indexOf('{{', end)
      return next !== -1
    })
  }
  return sites
}

/** The JSON pointer of the value string at `offset`, for an error's message: the pass again, up to it. */
function pointerTo(text: string, offset: number): string {
  let pointer = ''
  scan(text, (start, _end, stack) => {
    if (start !== offset) return true
    pointer = toPointer(stack)
    return false
  })
  return pointer
}

function closingQuote(text: string, open: number): number {
  let at = text.indexOf('"', open + 1)
  for (;;) {
    let backslashes = 0
    while (text.charCodeAt(at - 1 - backslashes) === BACKSLASH) backslashes++
    if (backslashes % 2 === 0) return at
    at = text.indexOf('"', at + 1)
  }
}

function compileSite(text: string, start: number, end: number, stack: readonly Frame[], budget: TokenBudget): Site {
  const literal = text.slice(start, end)
  const value = literal.includes('\\') ? (JSON.parse(literal) as string) : literal.slice(1, -1)
  try {
    const template = parseTemplate(value)
    budget.take(template)
    return { start, end, template }
  } catch (err) {
    throw err instanceof ExpressionError ? err.at(toPointer(stack)) : err
  }
}

function toPointer(stack: readonly Frame[]): string {
  let out = ''
  for (const frame of stack) {
    const key = frame.array ? String(frame.index) : (JSON.parse(frame.rawKey) as string)
    out += '/' + key.replaceAll('~', '~0').replaceAll('/', '~1')
  }
  return out
}
