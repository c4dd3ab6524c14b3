import type { SessionAuthorized, SessionCreated } from '../schemas/sessions.js'

/** A new session: its key is shown here once, with the nonce a private Application authorizes. */
export function presentSessionCreated(s: { session_key: string; nonce: string; expires_at: Date }): SessionCreated {
  return { session_key: s.session_key, nonce: s.nonce, expires_at: s.expires_at.toISOString() }
}

export function presentSessionAuthorized(s: { expires_at: Date }): SessionAuthorized {
  return { expires_at: s.expires_at.toISOString() }
}
