import type { MachineInfo } from './proc.js'

/** The summary row every bench contributes to `bench/results/<date>.md`. */
export interface Figure {
  bench: string
  name: string
  unit: string
  tessera: number
  baseline?: number
  baselineName?: string
  /** tessera / baseline */
  ratio?: number
  /** tessera - baseline, in `unit` */
  added?: number
  /**
   * The lowest and highest of the ratio (or of `added`) computed round by round, when the two
   * sides were measured in the same interleaved rounds: how far one round can be from the median.
   */
  range?: [number, number]
  /**
   * CPU µs per request of Tessera (and of the baseline), shown beside the ratio: on a shared
   * machine it is the cost measure least disturbed by other load. Required for req/s ratios.
   */
  cpuUs?: number
  baselineCpuUs?: number
  target?: string
  pass?: boolean
}

export function figure(f: Figure): Figure {
  if (f.baseline !== undefined && f.ratio === undefined) f.ratio = Math.round((f.tessera / f.baseline) * 100) / 100
  if (f.unit === 'req/s' && f.baseline !== undefined && (f.cpuUs === undefined || f.baselineCpuUs === undefined)) {
    throw new Error(`figure "${f.bench}: ${f.name}": a throughput ratio needs CPU µs/req of both sides`)
  }
  return f
}

/**
 * The lowest and highest of `f(a's round i, b's round i)`: for two figures measured in the same
 * interleaved rounds, how far a single round's comparison strays from the medians'.
 */
export function roundRange(a: number[], b: number[], f: (x: number, y: number) => number, digits: number): [number, number] | undefined {
  const each = a.slice(0, b.length).map((x, i) => f(x, b[i]!))
  if (each.length < 2) return undefined
  const r = (n: number) => Math.round(n * 10 ** digits) / 10 ** digits
  return [r(Math.min(...each)), r(Math.max(...each))]
}

const num = (n: number | undefined, digits = 0) =>
  n === undefined || !Number.isFinite(n) ? '–' : n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })

export const SUMMARY_HEADER = ['figure', 'Tessera', 'baseline', 'ratio', 'CPU µs/req (Tessera vs baseline)', 'target', 'pass/fail']

const unitSuffix = (f: Figure) => ` ${f.unit}`
const signed = (n: number) => `${n >= 0 ? '+' : ''}${num(n)}`

/** ` (rounds 0.62–0.85×)` or ` (rounds +357 to +1,062 µs)`: the figure's `range`, if any. */
export function roundsText(f: Figure): string {
  if (f.range === undefined) return ''
  const [low, high] = f.range
  return f.added === undefined ? ` (rounds ${num(low, 2)}–${num(high, 2)}×)` : ` (rounds ${signed(low)} to ${signed(high)}${unitSuffix(f)})`
}

/** One summary row, columns as SUMMARY_HEADER; CPU µs/req has its own column beside the ratio. */
export function figureRow(f: Figure): string[] {
  const unit = unitSuffix(f)
  const cpu = f.cpuUs === undefined ? '–' : `${num(f.cpuUs)}${f.baselineCpuUs === undefined ? '' : ` vs ${num(f.baselineCpuUs)}`}`
  const compare = [f.ratio === undefined ? '' : `${num(f.ratio, 2)}×`, f.added === undefined ? '' : `${signed(f.added)}${unit}`]
  return [
    `${f.bench}: ${f.name}`,
    `${num(f.tessera, f.tessera < 10 ? 2 : 0)}${unit}`,
    f.baseline === undefined ? '–' : `${num(f.baseline, f.baseline < 10 ? 2 : 0)}${unit}${f.baselineName ? ` (${f.baselineName})` : ''}`,
    (compare.filter(Boolean).join(' / ') || '–') + roundsText(f),
    cpu,
    f.target ?? '–',
    f.pass === undefined ? '–' : f.pass ? 'pass' : '**FAIL**',
  ]
}

export function summaryTable(figures: Figure[]): string {
  return markdownTable(SUMMARY_HEADER, figures.map(figureRow))
}

/** The machine a result was measured on and its load at the time: every figure is read against it. */
export function machineLine(m: MachineInfo): string {
  return `${m.cpu}, ${m.cores} cores, ${m.memoryGb} GB RAM, ${m.os}, Node ${m.node}; load average (1/5/15 min) ${m.loadAverage.join(' / ')}`
}

export function markdownTable(header: string[], rows: (string | number)[][]): string {
  const line = (cells: (string | number)[]) => `| ${cells.map((c) => String(c).replace(/\|/g, '\\|')).join(' | ')} |`
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n')
}

/** console.table rows → markdown, with the same columns. */
export function rowsToMarkdown(rows: Record<string, string | number>[]): string {
  if (rows.length === 0) return '(no rows)'
  const header = Object.keys(rows[0]!)
  return markdownTable(header, rows.map((r) => header.map((h) => r[h] ?? '')))
}
