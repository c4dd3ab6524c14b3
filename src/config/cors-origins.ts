/** `SVC_CORS_ORIGINS=*`: any origin may call (keys travel in a header, never in cookies). */
export const ANY_ORIGIN = '*'

/**
 * The origins browsers may call Tessera from: each `scheme://host[:port]` exactly as a browser
 * sends it in `Origin` (lower case, no path, no default port), or `*` alone. Throws an Error
 * naming every entry that is not one, so a typo stops the start instead of silently refusing
 * the origin it meant.
 */
export function parseCorsOrigins(value: string): readonly string[] {
  const entries = value.split(',').map((s) => s.trim()).filter(Boolean)
  if (entries.includes(ANY_ORIGIN)) {
    if (entries.length > 1) throw new Error(`SVC_CORS_ORIGINS: ${ANY_ORIGIN} allows every origin and cannot be listed with others`)
    return [ANY_ORIGIN]
  }
  const bad = entries.filter((entry) => !isOrigin(entry))
  if (bad.length > 0) {
    const list = bad.map((entry) => JSON.stringify(entry)).join(', ')
    throw new Error(`SVC_CORS_ORIGINS: ${list} ${bad.length === 1 ? 'is not an origin' : 'are not origins'} (scheme://host[:port], lower case, no path or trailing slash, no wildcard but * alone, e.g. https://shop.example.com)`)
  }
  return [...new Set(entries)]
}

function isOrigin(entry: string): boolean {
  if (!URL.canParse(entry)) return false
  const url = new URL(entry)
  // `https://*.example.com` parses (as a host named `*.example.com`) but no browser sends it.
  return (url.protocol === 'https:' || url.protocol === 'http:') && url.origin === entry && !url.hostname.includes('*')
}
