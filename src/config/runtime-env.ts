/**
 * The only variables the Reactor runtime child is started with. It runs tenant code next to
 * revealed data: a sandbox escape must not find the master key, the key-hash secret, the
 * bootstrap or operator key, or DATABASE_URL/REDIS_URL in its own environment. The child reads
 * nothing from the environment (its limits arrive over IPC); these only keep time zone, locale
 * and temporary files as the operator set them.
 */
export const RUNTIME_ENV_ALLOW_LIST: readonly string[] = ['TZ', 'LANG', 'LC_ALL', 'TMPDIR']

export function runtimeChildEnv(env: Record<string, string | undefined>): Record<string, string> {
  const out: Record<string, string> = {}
  for (const name of RUNTIME_ENV_ALLOW_LIST) {
    const value = env[name]
    if (value !== undefined) out[name] = value
  }
  return out
}
