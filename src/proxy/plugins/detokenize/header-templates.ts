import { AppError } from '../../../errors/index.js'
import { ExpressionError, type TokenLookup } from '../../../expressions/index.js'
import type { TokenBudget } from './token-budget.js'
import { planText } from './text-templates.js'

interface HeaderSite {
  /** Index of the value in the flat header list. */
  index: number
  name: string
  render: (lookup: TokenLookup) => string
}

// A substituted CR or LF could smuggle a header or a second request; NUL is cut off by some servers.
const UNSAFE_IN_HEADER = /[\r\n\0]/
const NON_ASCII = /[\u0080-\uffff]/

/**
 * Header values travel as bytes, which Node reads and writes one per character (Latin-1): a
 * caller's literal `é` arrives as its two UTF-8 bytes and leaves the same. Substituted data is
 * spelled the same way, as its UTF-8 bytes, so any character can be sent and the destination
 * reads one encoding throughout.
 */
const asHeaderBytes = (value: string): string => (NON_ASCII.test(value) ? Buffer.from(value, 'utf8').toString('latin1') : value)

/**
 * Expressions in header values. SVC-* headers are never forwarded, so they are never evaluated.
 * Returns null when no header holds one; otherwise the renderer returns a new list and leaves
 * the incoming one alone.
 */
export function planHeaders(headers: readonly string[], budget: TokenBudget): ((lookup: TokenLookup) => string[]) | null {
  let sites: HeaderSite[] | undefined
  for (let i = 1; i < headers.length; i += 2) {
    const value = headers[i] as string
    if (!value.includes('{{')) continue
    const name = (headers[i - 1] as string).toLowerCase()
    if (name.startsWith('svc-')) continue
    const render = located(name, () => planText(value, budget, asHeaderBytes))
    ;(sites ??= []).push({ index: i, name, render })
  }
  if (sites === undefined) return null
  const found = sites
  return (lookup) => {
    const out = headers.slice()
    for (const site of found) {
      const value = located(site.name, () => site.render(lookup))
      if (UNSAFE_IN_HEADER.test(value)) {
        throw new AppError('bad_request', { detail: `A value substituted into the ${site.name} header contains CR, LF or NUL.` })
      }
      out[site.index] = value
    }
    return out
  }
}

/** A cheap pre-check over the values, names unread. */
export function headersMayHoldExpressions(headers: readonly string[]): boolean {
  for (let i = 1; i < headers.length; i += 2) if ((headers[i] as string).includes('{{')) return true
  return false
}

/** Header errors name the header rather than a JSON pointer. */
function located<T>(name: string, fn: () => T): T {
  try {
    return fn()
  } catch (err) {
    if (!(err instanceof ExpressionError)) throw err
    throw new AppError('bad_request', { detail: `Invalid expression in the ${name} header at position ${err.position}: ${err.reason}`, cause: err })
  }
}

