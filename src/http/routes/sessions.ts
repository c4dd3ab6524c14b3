import type { AuditRecorder } from '../../audit/audit-log.js'
import type { StoreTransaction } from '../../store/index.js'
import type { SessionsService } from '../../vault/sessions.js'
import { auditEvent, changeEvent } from '../audit-context.js'
import type { AppRouter } from '../context.js'
import { currentPrincipal } from '../middleware/authenticate.js'
import { presentSessionAuthorized, presentSessionCreated } from '../presenters/sessions.js'
import { AuthorizeSessionBody } from '../schemas/sessions.js'
import { validator } from '../schemas/validate.js'
import type { BodyParsers } from './body-parsers.js'

const parseAuthorize = validator(AuthorizeSessionBody)

export function sessionRoutes(router: AppRouter, sessions: SessionsService, audit: AuditRecorder, body: BodyParsers): void {
  router.post('/sessions', async (ctx) => {
    const s = await sessions.createSession(currentPrincipal(ctx.state))
    await audit.record([changeEvent(ctx, 'session.create', 'session', s.id, 201)])
    ctx.status = 201
    ctx.body = presentSessionCreated(s)
  })

  router.post('/sessions/authorize', body.json, async (ctx) => {
    // Built as not yet changed: the grant commits with its entry, or neither stands (a retry with
    // the same idempotency key then runs again).
    const event = (id: string) => auditEvent(ctx, { action: 'session.authorize', target: { type: 'session', ids: [id] }, outcome: 'success', status: 200 }, false)
    const record = (trx: StoreTransaction, id: string) => audit.recordIn(trx, [event(id)])
    const authorized = await sessions.authorizeSession(currentPrincipal(ctx.state), parseAuthorize(ctx.state.body), record)
    ctx.state.changed = true
    ctx.body = presentSessionAuthorized(authorized)
  })
}
