import type { JSONSchemaType } from 'ajv'
import type { Principal } from '../../../auth/principal.js'
import { AppError } from '../../../errors/index.js'
import { ExpressionError, type TokenLookup } from '../../../expressions/index.js'
import type { Exchange, ProxyPlugin } from '../../pipeline/index.js'
import { mayHoldExpressions, planBody } from './body-templates.js'
import { contentCoding, findHeader, flatValue } from '../../../egress/headers.js'
import { headersMayHoldExpressions, planHeaders } from './header-templates.js'
import { TokenBudget } from './token-budget.js'

/** The vault's side of detokenization: one query for every id, permission checked on each. */
export interface TokenResolver {
  resolve(principal: Principal, tokenIds: ReadonlySet<string>, permission: 'token:use' | 'token:read'): Promise<TokenLookup>
}

export interface DetokenizeConfig {
  /** Distinct tokens one request may reference, body and headers together. */
  maxTokens: number
}

const configSchema: JSONSchemaType<DetokenizeConfig> = {
  type: 'object',
  properties: { maxTokens: { type: 'integer', minimum: 1 } },
  required: ['maxTokens'],
  additionalProperties: false,
}

/**
 * Replaces `{{ token }}` expressions in the outgoing body and header values with token data the
 * caller may `token:use`. Priority 500 leaves room on both sides for request transforms.
 */
export function detokenizePlugin(vault: TokenResolver): ProxyPlugin<DetokenizeConfig> {
  return {
    name: 'detokenize',
    priority: 500,
    configSchema,
    async beforeForward(exchange, config) {
      try {
        await detokenize(exchange, vault, config.maxTokens)
      } catch (err) {
        if (err instanceof ExpressionError) throw new AppError('bad_request', { detail: err.message, cause: err })
        throw err
      }
    },
  }
}

async function detokenize(exchange: Exchange, vault: TokenResolver, maxTokens: number): Promise<void> {
  const { outgoing } = exchange
  // The common case, no expression anywhere, allocates nothing and parses nothing.
  if (!mayHoldExpressions(outgoing.body) && !headersMayHoldExpressions(outgoing.headers)) return
  const budget = new TokenBudget(maxTokens)
  // Everything is parsed and counted before the vault is asked, so a bad request costs no query.
  // A coded (compressed) body is bytes, not text: it goes out as it came.
  const coded = contentCoding(flatValue(outgoing.headers, 'content-encoding')) !== undefined
  const body = coded ? null : planBody(outgoing.body, findHeader(outgoing.headers, 'content-type'), budget)
  const headers = planHeaders(outgoing.headers, budget)
  if (budget.ids.size === 0) return
  const lookup = await vault.resolve(exchange.principal, budget.ids, 'token:use')
  exchange.detokenized = budget.ids
  // Recorded before anything is rendered from the data: a value that cannot go into a header,
  // or a filter that does not fit it, answers with something about the data.
  await exchange.audit?.forwarding([...budget.ids])
  // Render both before assigning either: a failure must not leave a half-substituted request.
  const newHeaders = headers?.(lookup)
  const newBody = body?.(lookup)
  if (newHeaders) outgoing.headers = newHeaders
  if (newBody) outgoing.body = newBody
}
