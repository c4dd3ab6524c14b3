import type { AuditRecorder } from '../../audit/audit-log.js'
import { ValidationError } from '../../errors/index.js'
import type { TokenService } from '../../vault/token-service.js'
import type { AppRouter } from '../context.js'
import { decodeCursor, encodeCursor } from '../cursor.js'
import { tokenEvent } from '../audit-context.js'
import { currentPrincipal, requirePermission } from '../middleware/authenticate.js'
import { presentCursorPage } from '../presenters/common.js'
import { presentToken } from '../presenters/tokens.js'
import { ListTokensV2Query, MetadataFilter, SearchTokensV2Body } from '../schemas/tokens.js'
import { unsafeTextReason } from '../../shapes/unsafe-text.js'
import { validator } from '../schemas/validate.js'
import type { BodyParsers } from './body-parsers.js'

const parseList = validator(ListTokensV2Query, { query: true })
const parseSearch = validator(SearchTokensV2Body)
const parseMetadata = validator(MetadataFilter)

/**
 * `GET /v2/tokens` and `POST /v2/tokens/search`: the v1 list and search (same permissions, same
 * access-rule scope, same transforms) paged by cursor, as the hosted service's node SDK calls them.
 */
export function tokenV2Routes(router: AppRouter, tokens: TokenService, audit: AuditRecorder, body: BodyParsers): void {
  router.get('/v2/tokens', requirePermission('token:read'), async (ctx) => {
    const q = parseList({ ...ctx.query })
    const filter = { ids: q.id, types: q.type, containers: q.container, fingerprints: q.fingerprint, metadata: metadataFilter(q.metadata) }
    const page = await tokens.listTokensFrom(currentPrincipal(ctx.state), filter, decodeCursor(q.start), q.size)
    await audit.record([tokenEvent(ctx, 'token.list', page.items.map((v) => v.record.id), 200, page.items)])
    ctx.body = presentCursorPage(page.items, q.size, page.next && encodeCursor(page.next), presentToken)
  })

  router.post('/v2/tokens/search', requirePermission('token:search'), body.json, async (ctx) => {
    const q = parseSearch(ctx.state.body)
    const page = await tokens.searchTokensFrom(currentPrincipal(ctx.state), q.query, decodeCursor(q.start), q.size)
    await audit.record([tokenEvent(ctx, 'token.search', page.items.map((v) => v.record.id), 200, page.items)])
    ctx.body = presentCursorPage(page.items, q.size, page.next && encodeCursor(page.next), presentToken)
  })
}

function metadataFilter(json: string | undefined): Record<string, string> {
  if (json === undefined) return {}
  let metadata: Record<string, string>
  try {
    metadata = parseMetadata(JSON.parse(json))
  } catch {
    throw ValidationError.field('metadata', 'must be a JSON object of strings')
  }
  // The text guard saw only the query text: a JSON escape (`\u0000`, `\ud800`) hides what jsonb refuses.
  for (const text of Object.entries(metadata).flat()) {
    const reason = unsafeTextReason(text)
    if (reason !== undefined) throw ValidationError.field('metadata', reason)
  }
  return metadata
}
