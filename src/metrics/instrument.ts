import type { Forwarder } from '../egress/forward.js'
import type { RateLimiter } from '../ratelimit/index.js'
import type { TokenService } from '../vault/token-service.js'
import { statusClass, type Metrics } from './metrics.js'

/** Destination calls: latency until the answer's headers, by status class (`error`: no answer). */
export function instrumentForwarder(forwarder: Forwarder, metrics: Metrics): Forwarder {
  return {
    ...forwarder,
    async forward(req) {
      const end = metrics.proxyDuration.startTimer()
      try {
        const res = await forwarder.forward(req)
        end({ status_class: statusClass(res.status) })
        return res
      } catch (err) {
        end({ status_class: 'error' })
        throw err
      }
    },
  }
}

/** Every decision, by outcome and (when limited) the scope that limited it. */
export function instrumentLimiter(limiter: RateLimiter, metrics: Metrics): RateLimiter {
  return {
    ...limiter,
    async check(ip, method, path) {
      const decision = await limiter.check(ip, method, path)
      if (decision.allowed) metrics.rateLimitDecisions.inc({ decision: 'allowed', scope: '' })
      else metrics.rateLimitDecisions.inc({ decision: 'limited', scope: decision.scope })
      return decision
    },
  }
}

/** Tokens whose data an expression set was resolved to (every detokenizing path goes through `resolve`). */
export function instrumentTokens(tokens: TokenService, metrics: Metrics): TokenService {
  return {
    ...tokens,
    async resolve(principal, tokenIds, permission) {
      const lookup = await tokens.resolve(principal, tokenIds, permission)
      if (tokenIds.size > 0) metrics.detokenized.inc({ permission }, tokenIds.size)
      return lookup
    },
  }
}
