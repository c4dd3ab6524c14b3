export { loadConfig, testConfig, ConfigError, rateScopes, type Config, type RateScope, type RateRule } from './load-config.js'
export { describeConfig } from './describe.js'
