import { ExpressionError } from './expression-error.js'
import { applyFilter, toText } from './filters.js'
import { parseTemplate, type Expression, type Template } from './parse-template.js'

/** Returns a token's data, or throws the caller's own error for an unknown or forbidden id. */
export type TokenLookup = (tokenId: string) => unknown

export const DEFAULT_MAX_TOKENS = 100
/** JSON bodies deeper than this are refused rather than risking the stack in the walk. */
export const MAX_DEPTH = 512

export interface CompileOptions {
  /** Distinct token ids one value may reference (default 100). */
  maxTokens?: number
  /** Why an id may not be referenced here, or null; lets masks admit only `data` references. */
  checkReference?: (tokenId: string) => string | null
}

export interface CompiledValue {
  readonly tokenIds: ReadonlySet<string>
  /** The value with every expression evaluated; parts without expressions are shared, not copied. */
  render(lookup: TokenLookup, budget?: RenderBudget): unknown
}

/**
 * How many characters one render may produce. A template repeats a reference as often as it
 * likes, and a filter such as `reveal_last` gives back as much as it was given: a mask or search
 * index of a hundred references to large data rendered gigabytes. Past the budget, the render
 * stops with an ExpressionError.
 */
export class RenderBudget {
  private left: number

  constructor(readonly limit: number) {
    this.left = limit
  }

  spend(value: unknown): void {
    const chars = typeof value === 'string' ? value.length : value === null || typeof value !== 'object' ? 8 : (JSON.stringify(value)?.length ?? 0)
    if ((this.left -= chars) < 0) throw new ExpressionError(0, `the value renders to more than ${this.limit} characters`)
  }
}

export function evaluateExpression(expression: Expression, lookup: TokenLookup): unknown {
  let value = lookup(expression.tokenId)
  for (const filter of expression.filters) value = applyFilter(filter, value)
  return value === undefined ? null : value
}

/** `value` mode keeps the data's JSON type when the template is exactly one expression. */
export function renderTemplate(template: Template, lookup: TokenLookup, mode: 'value' | 'text', budget?: RenderBudget): unknown {
  if (mode === 'value' && template.single !== null) {
    const value = evaluateExpression(template.single, lookup)
    budget?.spend(value)
    return value
  }
  let out = ''
  for (const part of template.parts) {
    const piece = typeof part === 'string' ? part : toText(evaluateExpression(part, lookup))
    budget?.spend(piece)
    out += piece
  }
  return out
}

/** For text, XML and form bodies and header values: every expression becomes text. */
export function renderText(source: string, lookup: TokenLookup): string {
  if (source.indexOf('{{') === -1) return source
  return renderTemplate(parseTemplate(source), lookup, 'text') as string
}

/** For JSON bodies. Only strings are evaluated; object keys are left alone. */
export function renderValue(value: unknown, lookup: TokenLookup): unknown {
  return compileValue(value, { maxTokens: Number.POSITIVE_INFINITY }).render(lookup)
}

/**
 * Every distinct token id referenced anywhere in `value`, so the caller can load them all with
 * one query and check permissions before anything is rendered. To count one request as a whole,
 * pass its parts together, e.g. `{ body, headers }`.
 */
export function findTokenIds(value: unknown, options: CompileOptions = {}): Set<string> {
  return new Set(compileValue(value, options).tokenIds)
}

/** Parses once, for callers that need both the ids and the rendering (the proxy hot path). */
export function compileValue(value: unknown, options: CompileOptions = {}): CompiledValue {
  const ctx: Context = {
    ids: new Set(),
    maxTokens: options.maxTokens ?? DEFAULT_MAX_TOKENS,
    checkReference: options.checkReference,
    path: [],
  }
  const root = compileNode(value, ctx)
  return { tokenIds: ctx.ids, render: (lookup, budget) => renderNode(root, lookup, budget) }
}

type Node =
  | { kind: 'literal'; value: unknown }
  | { kind: 'template'; template: Template; pointer: string }
  | { kind: 'array'; items: Node[] }
  | { kind: 'object'; keys: string[]; nodes: Node[] }

interface Context {
  ids: Set<string>
  maxTokens: number
  checkReference: ((tokenId: string) => string | null) | undefined
  // Keys from the root to the current node; turned into a pointer only where one is needed.
  path: (string | number)[]
}

function compileNode(value: unknown, ctx: Context): Node {
  if (typeof value === 'string') return value.indexOf('{{') === -1 ? { kind: 'literal', value } : compileString(value, ctx)
  if (value === null || typeof value !== 'object') return { kind: 'literal', value }
  if (ctx.path.length >= MAX_DEPTH) {
    throw new ExpressionError(0, `the value is nested more than ${MAX_DEPTH} levels deep`, toPointer(ctx.path))
  }
  return Array.isArray(value) ? compileArray(value, ctx) : compileObject(value as Record<string, unknown>, ctx)
}

function compileString(value: string, ctx: Context): Node {
  let template: Template
  try {
    template = parseTemplate(value)
  } catch (err) {
    throw err instanceof ExpressionError ? err.at(toPointer(ctx.path)) : err
  }
  for (const part of template.parts) {
    if (typeof part === 'string' || ctx.ids.has(part.tokenId)) continue
    if (ctx.ids.size >= ctx.maxTokens) {
      const reason = `too many tokens: at most ${ctx.maxTokens} distinct tokens may be referenced`
      throw new ExpressionError(part.start, reason, toPointer(ctx.path))
    }
    const refused = ctx.checkReference?.(part.tokenId) ?? null
    if (refused !== null) throw new ExpressionError(part.idPosition, refused, toPointer(ctx.path))
    ctx.ids.add(part.tokenId)
  }
  return { kind: 'template', template, pointer: toPointer(ctx.path) }
}

function compileArray(value: unknown[], ctx: Context): Node {
  const items: Node[] = new Array(value.length)
  let literal = true
  for (let i = 0; i < value.length; i++) {
    ctx.path.push(i)
    const node = compileNode(value[i], ctx)
    ctx.path.pop()
    items[i] = node
    if (node.kind !== 'literal') literal = false
  }
  return literal ? { kind: 'literal', value } : { kind: 'array', items }
}

function compileObject(value: Record<string, unknown>, ctx: Context): Node {
  const keys = Object.keys(value)
  const nodes: Node[] = new Array(keys.length)
  let literal = true
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i] as string
    ctx.path.push(key)
    const node = compileNode(value[key], ctx)
    ctx.path.pop()
    nodes[i] = node
    if (node.kind !== 'literal') literal = false
  }
  return literal ? { kind: 'literal', value } : { kind: 'object', keys, nodes }
}

function renderNode(node: Node, lookup: TokenLookup, budget: RenderBudget | undefined): unknown {
  switch (node.kind) {
    case 'literal':
      return node.value
    case 'template':
      try {
        return renderTemplate(node.template, lookup, 'value', budget)
      } catch (err) {
        throw err instanceof ExpressionError ? err.at(node.pointer) : err
      }
    case 'array':
      return node.items.map((item) => renderNode(item, lookup, budget))
    case 'object': {
      // defineProperty-style creation: a key named "__proto__" stays an own property.
      const entries = node.keys.map((key, i) => [key, renderNode(node.nodes[i] as Node, lookup, budget)] as const)
      return Object.fromEntries(entries)
    }
  }
}

function toPointer(path: readonly (string | number)[]): string {
  let out = ''
  for (const key of path) out += '/' + String(key).replaceAll('~', '~0').replaceAll('/', '~1')
  return out
}
