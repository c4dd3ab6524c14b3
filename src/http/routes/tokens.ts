import type { AuditLog } from '../../audit/audit-log.js'
import { ValidationError } from '../../errors/index.js'
import { detokenizeValue, tokenizeValue, type TokenizeDeps } from '../../vault/tokenize.js'
import type { AppRouter } from '../context.js'
import { tokenEvent } from '../audit-context.js'
import { answerJson } from '../json-answer.js'
import { currentPrincipal, requirePermission } from '../middleware/authenticate.js'
import { presentPage } from '../presenters/common.js'
import { presentToken, presentUpdatedToken } from '../presenters/tokens.js'
import { CreateTokenBody, ListTokensQuery, SearchTokensBody, UpdateTokenBody } from '../schemas/tokens.js'
import { validator } from '../schemas/validate.js'
import type { BodyParsers } from './body-parsers.js'

const parseCreate = validator(CreateTokenBody)
const parseUpdate = validator(UpdateTokenBody)
const parseList = validator(ListTokensQuery, { query: true })
const parseSearch = validator(SearchTokensBody)

/** `maxDetokenizeTokens`: how many token ids one `/detokenize` value may name. */
export function tokenRoutes(router: AppRouter, vault: TokenizeDeps, audit: AuditLog, body: BodyParsers, maxDetokenizeTokens: number): void {
  const { tokens } = vault

  router.post('/tokens', requirePermission('token:create'), body.json, async (ctx) => {
    const view = await tokens.createToken(currentPrincipal(ctx.state), parseCreate(ctx.state.body))
    await audit.record([tokenEvent(ctx, 'token.create', [view.record.id], 201, [view], view.existing !== true)])
    ctx.status = 201
    ctx.body = presentToken(view)
  })

  router.get('/tokens', requirePermission('token:read'), async (ctx) => {
    const { metadata, rest } = splitMetadata(ctx.query)
    const q = parseList(rest)
    const page = await tokens.listTokens(currentPrincipal(ctx.state), { ids: q.id, types: q.type, containers: q.container, metadata }, q.page, q.size)
    await audit.record([tokenEvent(ctx, 'token.list', page.items.map((v) => v.record.id), 200, page.items)])
    ctx.body = presentPage(page.items, page.total, q.page, q.size, presentToken)
  })

  router.post('/tokens/search', requirePermission('token:search'), body.json, async (ctx) => {
    const q = parseSearch(ctx.state.body)
    const page = await tokens.searchTokens(currentPrincipal(ctx.state), q.query, q.page, q.size)
    await audit.record([tokenEvent(ctx, 'token.search', page.items.map((v) => v.record.id), 200, page.items)])
    ctx.body = presentPage(page.items, page.total, q.page, q.size, presentToken)
  })

  router.get('/tokens/:id', requirePermission('token:read'), async (ctx) => {
    const view = await tokens.getToken(currentPrincipal(ctx.state), ctx.params.id!)
    await audit.record([tokenEvent(ctx, 'token.read', [view.record.id], 200, [view])])
    ctx.body = presentToken(view)
  })

  router.patch('/tokens/:id', requirePermission('token:update'), body.mergePatch, async (ctx) => {
    const view = await tokens.updateToken(currentPrincipal(ctx.state), ctx.params.id!, parseUpdate(ctx.state.body))
    await audit.record([tokenEvent(ctx, 'token.update', [view.record.id], 200, [view])])
    ctx.body = presentUpdatedToken(view)
  })

  router.delete('/tokens/:id', requirePermission('token:delete'), async (ctx) => {
    await tokens.deleteToken(currentPrincipal(ctx.state), ctx.params.id!)
    await audit.record([tokenEvent(ctx, 'token.delete', [ctx.params.id!], 204)])
    ctx.status = 204
  })

  router.post('/tokenize', requirePermission('token:create'), body.json, async (ctx) => {
    const answer = await tokenizeValue(vault, currentPrincipal(ctx.state), ctx.state.body, presentToken, undefined, (ids, views, stored) =>
      audit.record([tokenEvent(ctx, 'token.create', ids, 200, views, stored)]),
    )
    answerJson(ctx, answer)
  })

  router.post('/detokenize', requirePermission('token:read'), body.json, async (ctx) => {
    const answer = await detokenizeValue(tokens, currentPrincipal(ctx.state), ctx.state.body, maxDetokenizeTokens, 'token:read', (ids) =>
      audit.record([Object.assign(tokenEvent(ctx, 'token.detokenize', [...ids], 200), { tokenIds: [...ids] })]),
    )
    answerJson(ctx, answer)
  })
}

/** `metadata.<key>=<value>` filters are open-ended, so they are taken out before schema validation. */
function splitMetadata(query: Record<string, string | string[] | undefined>) {
  // Without a prototype, a parameter named `__proto__` (or `metadata.__proto__`) stays a key: an
  // unknown parameter (400) or a filter no token matches, never silently dropped.
  const metadata = Object.create(null) as Record<string, string>
  const rest = Object.create(null) as Record<string, unknown>
  for (const [key, value] of Object.entries(query)) {
    if (key.startsWith('metadata.') && key.length > 9) {
      // Filters are ANDed: the same key twice with two values is a question no token answers,
      // and taking one of them (the last, as before) let a caller widen a filter it was given.
      const values = new Set(Array.isArray(value) ? value : [value ?? ''])
      if (values.size > 1) throw ValidationError.field(key, 'given more than once with different values')
      metadata[key.slice(9)] = [...values][0] ?? ''
    } else rest[key] = value
  }
  return { metadata, rest }
}
