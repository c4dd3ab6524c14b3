/**
 * The import boundaries of ARCHITECTURE.md, as eslint `no-restricted-imports` zones over src/.
 * A flat-config block replaces (does not merge) the rule options of an earlier block, so every
 * zone lists all the restrictions that hold in it; each restriction names the zones it is lifted in.
 */

const DOMAIN = ['applications', 'audit', 'auth', 'cache', 'config', 'egress', 'errors', 'expressions', 'idempotency', 'proxies', 'proxy', 'ratelimit', 'reactors', 'shapes', 'store', 'tenants', 'vault']

/** The domain parts above storage. */
const FEATURES = ['applications', 'audit', 'auth', 'idempotency', 'proxies', 'proxy', 'reactors', 'tenants', 'vault']

/** Zones from the widest to the narrowest: for a file in several, the last one wins. */
const zones = [
  { name: 'root', files: ['src/**/*.ts'] },
  { name: 'domain', files: DOMAIN.map((d) => `src/${d}/**/*.ts`) },
  { name: 'egress', files: ['src/egress/**/*.ts'] },
  { name: 'storage', files: ['src/store/**/*.ts', 'src/cache/**/*.ts'] },
  { name: 'store', files: ['src/store/**/*.ts'] },
  { name: 'redis-store', files: ['src/ratelimit/stores/redis.ts'] },
  { name: 'runtime-host', files: ['src/reactors/runtime/host/**/*.ts'] },
  { name: 'runtime-shared', files: ['src/reactors/runtime/shared/**/*.ts'] },
  { name: 'runtime-child', files: ['src/reactors/runtime/child/**/*.ts'] },
]

/**
 * What each side of the runtime boundary may import of the app beyond its own folder, as one
 * regular expression over the import path: anything that climbs out of the folder (`../`) and is
 * not one of the allowed places. (`../child/` from the host side has its own message above.)
 */
const RUNTIME_SIDES = {
  child: '^\\.\\./(?!shared/[^/]+$|\\.\\./\\.\\./errors/log-safe\\.js$|\\.\\./\\.\\./shapes/[^/]+$)',
  shared: '^\\.\\./(?!\\.\\./\\.\\./errors/log-safe\\.js$)',
  host: '^\\.\\./(?!shared/[^/]+$|child/|\\.\\./scheduling/[^/]+$|\\.\\./\\.\\./errors/[^/]+$)',
}

const restrictions = [
  {
    paths: ['knex', 'pg', '@electric-sql/pglite', 'knex-pglite'],
    message: 'Only src/store/ talks to the database (knex, pg, PGlite); use a repository.',
    liftedIn: ['store'],
  },
  {
    paths: ['ioredis'],
    message: 'Only src/ratelimit/stores/redis.ts talks to Redis.',
    liftedIn: ['redis-store'],
  },
  {
    paths: ['isolated-vm', 'piscina'],
    message: 'Only the runtime child (src/reactors/runtime/child/) loads isolated-vm: the API process must never host an isolate.',
    liftedIn: ['runtime-child'],
  },
  {
    patterns: ['**/runtime/child/**', '../child/**'],
    message: 'The runtime child runs in another process: the API side reaches it through runtime/host/ and the messages in runtime/shared/.',
    liftedIn: ['runtime-child'],
  },
  {
    regex: RUNTIME_SIDES.child,
    message: 'The runtime child runs tenant code: of the app it imports only runtime/shared/, errors/log-safe.ts and shapes/.',
    appliesIn: ['runtime-child'],
  },
  {
    regex: RUNTIME_SIDES.shared,
    message: 'runtime/shared/ is loaded on both sides of the boundary: of the app it imports only errors/log-safe.ts.',
    appliesIn: ['runtime-shared'],
  },
  {
    regex: RUNTIME_SIDES.host,
    message: 'runtime/host/ is owned by reactors/supervisor.ts: of the app it imports only runtime/shared/, reactors/scheduling/ and errors/.',
    appliesIn: ['runtime-host'],
  },
  {
    patterns: FEATURES.map((f) => `**/${f}/**`),
    message: 'Storage (store/, cache/) sits below the domain: it never imports a feature folder.',
    appliesIn: ['storage', 'store'],
  },
  {
    patterns: FEATURES.map((f) => `**/${f}/**`),
    message: 'Outbound HTTP (egress/) serves the feature folders and imports none of them.',
    appliesIn: ['egress'],
  },
  {
    patterns: ['**/http/**', '../http', '../../http'],
    message: 'Domain modules never import http/: routes call the domain, not the other way round.',
    appliesIn: ['domain', 'egress', 'storage', 'store', 'redis-store', 'runtime-host', 'runtime-shared', 'runtime-child'],
  },
]

function holdsIn(restriction, zone) {
  if (restriction.appliesIn) return restriction.appliesIn.includes(zone)
  return !restriction.liftedIn.includes(zone)
}

export const importZones = zones.map((zone) => {
  const held = restrictions.filter((r) => holdsIn(r, zone.name))
  return {
    files: zone.files,
    rules: {
      'no-restricted-imports': ['error', {
        paths: held.flatMap((r) => (r.paths ?? []).map((name) => ({ name, message: r.message }))),
        patterns: [
          ...held.filter((r) => r.patterns).map((r) => ({ group: r.patterns, message: r.message })),
          ...held.filter((r) => r.regex).map((r) => ({ regex: r.regex, message: r.message })),
        ],
      }],
    },
  }
})
