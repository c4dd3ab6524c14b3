/**
 * The rate-limit scopes, spelled once: their variables (`SVC_RATE_LIMIT_<SCOPE>`), the Config
 * entries and the limiter's maps all derive from this list.
 */
export const rateScopes = ['global', 'portal', 'tokens_search', 'tokens_list', 'tokens_create'] as const
export type RateScope = (typeof rateScopes)[number]

export type RateVariable = `SVC_RATE_LIMIT_${Uppercase<RateScope>}`

/** `<count>/<seconds>` per scope, as documented in API.md. */
export const defaultRates: Readonly<Record<RateScope, string>> = {
  global: '1000/10',
  portal: '600/10',
  tokens_search: '50/10',
  tokens_list: '100/10',
  tokens_create: '200/10',
}

export function rateVariable(scope: RateScope): RateVariable {
  return `SVC_RATE_LIMIT_${scope.toUpperCase()}` as RateVariable
}

/** One entry per scope, in list order. */
export function mapScopes<T>(fn: (scope: RateScope) => T): Record<RateScope, T> {
  return Object.fromEntries(rateScopes.map((scope) => [scope, fn(scope)])) as Record<RateScope, T>
}
