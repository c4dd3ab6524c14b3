export { loadConfig, testConfig, ConfigError, type Config, type RateRule } from './load-config.js'
export { rateScopes, mapScopes, type RateScope } from './rate-scopes.js'
export { describeConfig } from './describe.js'
