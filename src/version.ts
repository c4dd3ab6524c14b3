import { readFileSync } from 'node:fs'

/** Tessera's version from package.json, found from source (src/) and from a build (dist/src/) alike. */
export function packageVersion(): string {
  for (const up of ['../package.json', '../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(up, import.meta.url), 'utf8')) as { name?: string; version?: string }
      if (pkg.name === 'tessera' && pkg.version) return pkg.version
    } catch {
      // not at this depth
    }
  }
  return '0.0.0'
}
