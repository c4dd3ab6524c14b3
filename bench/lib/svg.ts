/**
 * Hand-written SVG (no dependencies): one row per proxy variant, three bar panels side by
 * side — throughput at saturation, p50 and p99 at concurrency 1 — with the issue-4 targets
 * drawn as dashed lines relative to the baseline (b).
 */
export interface ChartVariant {
  variant: string
  label: string
  rps: number
  p50Us: number
  p99Us: number
}

interface Panel {
  title: string
  value: (v: ChartVariant) => number
  format: (n: number) => string
  marks: { at: number; label: string }[]
  /** Variants left out of the scale (drawn clipped): (a) would flatten every other bar. */
  unscaled?: string[]
}

const ROW = 26
const TOP = 58
const LABEL_W = 230
const PANEL_W = 230
const GAP = 30
const COLORS: Record<string, string> = { a: '#9aa5b1', b: '#52606d', k: '#7b8794', f: '#8e6ac8' }

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
const fmtInt = (n: number) => Math.round(n).toLocaleString('en-US')
const fmtUs = (n: number) => (n >= 10_000 ? `${(n / 1000).toFixed(1)} ms` : `${Math.round(n)} µs`)

export function proxyChart(variants: ChartVariant[], subtitle: string): string {
  const b = variants.find((v) => v.variant === 'b')
  const panels: Panel[] = [
    { title: 'req/s at saturation (higher: better)', value: (v) => v.rps, format: fmtInt, marks: b ? [{ at: 0.5 * b.rps, label: '0.5×b' }, { at: 0.33 * b.rps, label: '0.33×b' }] : [], unscaled: ['a'] },
    { title: 'p50 at c=1 (lower: better)', value: (v) => v.p50Us, format: fmtUs, marks: b ? [{ at: b.p50Us + 500, label: 'b+0.5ms' }, { at: b.p50Us + 1000, label: 'b+1ms' }] : [] },
    { title: 'p99 at c=1 (lower: better)', value: (v) => v.p99Us, format: fmtUs, marks: [] },
  ]
  const width = LABEL_W + panels.length * (PANEL_W + GAP)
  const height = TOP + variants.length * ROW + 24
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="system-ui, sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
    `<text x="10" y="20" font-size="15" font-weight="bold">Tessera proxy, 1 KB JSON body</text>`,
    `<text x="10" y="38" fill="#52606d">${esc(subtitle)}</text>`,
  ]
  variants.forEach((v, i) => {
    out.push(`<text x="10" y="${TOP + i * ROW + 16}">${esc(`(${v.variant}) ${v.label}`)}</text>`)
  })
  panels.forEach((p, j) => {
    const x0 = LABEL_W + j * (PANEL_W + GAP)
    const scaled = variants.filter((v) => !p.unscaled?.includes(v.variant))
    const max = Math.max(1, ...scaled.map(p.value), ...p.marks.map((m) => m.at)) * 1.05
    const scale = (n: number) => (Math.min(max, Math.max(0, n)) / max) * (PANEL_W - 60)
    out.push(`<text x="${x0}" y="${TOP - 8}" font-weight="bold">${esc(p.title)}</text>`)
    out.push(`<line x1="${x0}" y1="${TOP}" x2="${x0}" y2="${TOP + variants.length * ROW}" stroke="#cbd2d9"/>`)
    variants.forEach((v, i) => {
      const y = TOP + i * ROW + 4
      const w = scale(p.value(v))
      out.push(`<rect x="${x0}" y="${y}" width="${w.toFixed(1)}" height="${ROW - 8}" fill="${COLORS[v.variant] ?? '#2f80ed'}"/>`)
      const clipped = p.value(v) > max
      if (clipped) out.push(`<path d="M${(x0 + w - 10).toFixed(1)} ${y - 1} l6 ${ROW - 6}" stroke="#fff" stroke-width="3"/>`)
      out.push(`<text x="${(x0 + w + 4).toFixed(1)}" y="${y + ROW - 12}">${esc(p.format(p.value(v)) + (clipped ? ' »' : ''))}</text>`)
    })
    p.marks.forEach((m, k) => {
      const x = (x0 + scale(m.at)).toFixed(1)
      out.push(`<line x1="${x}" y1="${TOP - 2}" x2="${x}" y2="${TOP + variants.length * ROW}" stroke="#d64545" stroke-dasharray="4 3"/>`)
      out.push(`<text x="${x}" y="${TOP + variants.length * ROW + 12 + k * 10}" fill="#d64545" font-size="10" text-anchor="middle">${esc(m.label)}</text>`)
    })
  })
  out.push('</svg>')
  return out.join('\n') + '\n'
}
