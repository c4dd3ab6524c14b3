export { createRateLimiter, type RateLimiter, type RateLimiterStatus, type RateLimitDecision, type CreateRateLimiterOptions } from './rate-limiter.js'
export { createClientIpResolver, type ClientIpResolver } from './client-ip.js'
export { selectRouteScope } from './scopes.js'
export type { RateLimitLogger } from './types.js'
