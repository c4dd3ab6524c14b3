import { parseTemplate, type Expression } from '../../expressions/index.js'

/** How much of one field a mask may show: all of it, or at most its first and last characters. */
export type Allowance = 'all' | { first: number; last: number }

/**
 * What a mask of one token type may show, by path below `data` (`''` is `data` itself, `'*'`
 * any path). A field that is not listed may not appear in a mask at all (a card's CVC).
 */
export type MaskLimits = Readonly<Record<string, Allowance>>

/** What one mask expression shows: the field it reads and how much of it. */
interface Shown {
  path: string[]
  window: 'all' | { first: number } | { last: number }
  /** The window is a `slice` of a value not made text first: of an array it keeps whole elements. */
  slicesValue: boolean
}

/**
 * Every way `mask` shows more than `limits` allow, as messages; empty when it stays within.
 * Masks are read by keys holding only `mask`, so this is what keeps a mask from handing them
 * plaintext (a rewritten mask of `{{ data.number }}`). Runs on every mask that is saved and
 * again whenever one is rendered.
 */
export function maskProblems(mask: unknown, limits: MaskLimits, typeName: string): string[] {
  return [...expressionsIn(mask)].flatMap((expression) => shownProblem(shownBy(expression), limits, typeName) ?? [])
}

/** Why one expression shows more than `limits` allow, or undefined when it stays within. */
function shownProblem(shown: Shown, limits: MaskLimits, typeName: string): string | undefined {
  const field = ['data', ...shown.path].join('.')
  const allowance = allowanceFor(shown.path, limits)
  if (allowance === undefined) return `a ${typeName} mask may not show ${field}`
  if (!within(shown.window, allowance)) return `a ${typeName} mask may show ${describe(allowance)} of ${field}`
  // Typed fields with limits are validated strings; data of unknown shape may hold arrays.
  if (shown.slicesValue && limits['*'] !== undefined) return `a ${typeName} mask may slice only text: put to_string before slice on ${field}`
  return undefined
}

/**
 * Whether an equality test of `template` (a search index, a fingerprint expression) tells a
 * reader whose decision is `mask` more than the mask and the type's own fingerprint already do.
 * That reader sees what the mask shows and may test the whole value the default fingerprint
 * hashes, so a part within the mask limits tells it nothing new, and neither does the one field
 * the default fingerprint hides (a card's whole number: the rest of that fingerprint is shown).
 * Any other part does: a card's CVC or its middle digits alone, tested in a thousand searches.
 */
export function testsBeyondMask(type: { name: string; maskLimits: MaskLimits; defaultFingerprintExpression: string }, template: string): boolean {
  const hiddenByDefault = [...expressionsIn(type.defaultFingerprintExpression)].map(shownBy).filter((shown) => shownProblem(shown, type.maskLimits, type.name) !== undefined)
  const testedAnyway = hiddenByDefault.length === 1 && hiddenByDefault[0]!.window === 'all' ? hiddenByDefault[0]!.path : undefined
  // Compared segment by segment: `json: '$[""]'` (the key "") must not pass for `data` itself.
  const isTestedAnyway = (path: readonly string[]) => testedAnyway !== undefined && path.length === testedAnyway.length && path.every((segment, i) => segment === testedAnyway[i])
  for (const expression of expressionsIn(template)) {
    const shown = shownBy(expression)
    if (shown.window === 'all' && isTestedAnyway(shown.path)) continue
    if (shownProblem(shown, type.maskLimits, type.name) !== undefined) return true
  }
  return false
}

function* expressionsIn(value: unknown): Generator<Expression> {
  if (typeof value === 'string') {
    if (!value.includes('{{')) return
    for (const part of parseTemplate(value).parts) if (typeof part !== 'string') yield part
  } else if (Array.isArray(value)) {
    for (const item of value) yield* expressionsIn(item)
  } else if (value !== null && typeof value === 'object') {
    for (const item of Object.values(value)) yield* expressionsIn(item)
  }
}

/**
 * The first filter that cuts characters decides the window; later filters only take from
 * what it left. `json` before that descends into the data; a `slice` from the end counts as
 * the last characters, one from the start as the first ones.
 */
function shownBy(expression: Expression): Shown {
  const path = expression.tokenId === 'data' ? [] : expression.tokenId.slice('data.'.length).split('.')
  let window: Shown['window'] = 'all'
  // After to_string the value is text, which `json` cannot descend into.
  let text = false
  let slicesValue = false
  for (const filter of expression.filters) {
    if (window !== 'all') break
    switch (filter.name) {
      case 'json':
        if (!text) for (const segment of filter.path) path.push('key' in segment ? segment.key : String(segment.index))
        break
      case 'last4':
        window = { last: 4 }
        break
      case 'reveal_last':
        window = { last: filter.count }
        break
      case 'slice':
        window = filter.start < 0 ? { last: -filter.start } : { first: filter.start + filter.length }
        slicesValue = !text
        break
      case 'to_string':
        text = true
        break
    }
  }
  return { path, window, slicesValue }
}

/** The allowance of the field itself or of a field it lies within; a whole object that holds limited fields has none. */
function allowanceFor(path: readonly string[], limits: MaskLimits): Allowance | undefined {
  const any = limits['*']
  if (any !== undefined) return any
  for (let depth = path.length; depth >= 0; depth--) {
    const allowance = limits[path.slice(0, depth).join('.')]
    if (allowance !== undefined) return allowance
  }
  return undefined
}

function within(window: Shown['window'], allowance: Allowance): boolean {
  if (allowance === 'all') return true
  if (window === 'all') return false
  return 'first' in window ? window.first <= allowance.first : window.last <= allowance.last
}

function describe(allowance: Allowance): string {
  if (allowance === 'all') return 'all'
  const parts = [allowance.first ? `the first ${allowance.first}` : '', allowance.last ? `the last ${allowance.last}` : ''].filter(Boolean)
  return `at most ${parts.join(' and ')} characters`
}

// Masks repeat (most tokens keep their type's default), so each distinct one is checked once.
// Only short ones are kept: keyed by its text, a writer's distinct multi-megabyte masks held
// gigabytes (1,000 of them); a long one is checked at each use, as it is rendered at each use.
const checked = new Map<string, boolean>()
const MAX_CHECKED = 1000
const MAX_CHECKED_KEY_CHARS = 4096

/** What the memo of checked masks holds (its bound is what a test checks). */
export function checkedMaskMemo(): { entries: number; chars: number } {
  let chars = 0
  for (const key of checked.keys()) chars += key.length
  return { entries: checked.size, chars }
}

/**
 * The mask to render for a token, or null: a stored mask that shows more than its type
 * allows (saved before these limits, say) fails closed, as a mask that cannot render does.
 */
export function allowedMask(type: { name: string; maskLimits: MaskLimits }, mask: unknown): unknown {
  if (mask === null || mask === undefined) return null
  const key = `${type.name}\n${JSON.stringify(mask)}`
  let ok = checked.get(key)
  if (ok === undefined) {
    try {
      ok = maskProblems(mask, type.maskLimits, type.name).length === 0
    } catch {
      ok = false
    }
    if (checked.size >= MAX_CHECKED) checked.clear()
    if (key.length <= MAX_CHECKED_KEY_CHARS) checked.set(key, ok)
  }
  return ok ? mask : null
}
