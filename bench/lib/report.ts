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

const num = (n: number | undefined, digits = 0) =>
  n === undefined || !Number.isFinite(n) ? '–' : n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })

export const SUMMARY_HEADER = ['figure', 'Tessera', 'baseline', 'ratio', 'CPU µs/req (Tessera vs baseline)', 'target', 'pass/fail']

/** One summary row, columns as SUMMARY_HEADER; CPU µs/req has its own column beside the ratio. */
export function figureRow(f: Figure): string[] {
  const unit = f.unit === 'µs' ? ' µs' : f.unit === 'ms' ? ' ms' : ` ${f.unit}`
  const cpu = f.cpuUs === undefined ? '–' : `${num(f.cpuUs)}${f.baselineCpuUs === undefined ? '' : ` vs ${num(f.baselineCpuUs)}`}`
  const compare = [f.ratio === undefined ? '' : `${num(f.ratio, 2)}×`, f.added === undefined ? '' : `${f.added >= 0 ? '+' : ''}${num(f.added)}${unit}`]
  return [
    `${f.bench}: ${f.name}`,
    `${num(f.tessera, f.tessera < 10 ? 2 : 0)}${unit}`,
    f.baseline === undefined ? '–' : `${num(f.baseline, f.baseline < 10 ? 2 : 0)}${unit}${f.baselineName ? ` (${f.baselineName})` : ''}`,
    compare.filter(Boolean).join(' / ') || '–',
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
