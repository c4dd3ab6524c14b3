import type { SessionsService } from '../../vault/sessions.js'
import type { AppRouter } from '../context.js'
import { currentPrincipal } from '../middleware/authenticate.js'
import { AuthorizeSessionBody } from '../schemas/sessions.js'
import { validator } from '../schemas/validate.js'
import type { BodyParsers } from './body-parsers.js'

const parseAuthorize = validator(AuthorizeSessionBody)

export function sessionRoutes(router: AppRouter, sessions: SessionsService, body: BodyParsers): void {
  router.post('/sessions', async (ctx) => {
    const s = await sessions.createSession(currentPrincipal(ctx.state))
    ctx.status = 201
    ctx.body = { session_key: s.session_key, nonce: s.nonce, expires_at: s.expires_at.toISOString() }
  })

  router.post('/sessions/authorize', body.json, async (ctx) => {
    const { expires_at } = await sessions.authorizeSession(currentPrincipal(ctx.state), parseAuthorize(ctx.state.body))
    ctx.body = { expires_at: expires_at.toISOString() }
  })
}
