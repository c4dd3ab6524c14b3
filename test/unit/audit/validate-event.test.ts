import { randomUUID } from 'node:crypto'
import t from 'tap'
import type { AuditEvent } from '../../../src/audit/events.js'
import { AuditEventError, validateAuditEvent } from '../../../src/audit/validate-event.js'

const CARD = '4242424242424242'

const valid = (overrides: Record<string, unknown> = {}): AuditEvent =>
  ({
    tenantId: randomUUID(),
    actor: { kind: 'application', id: randomUUID() },
    action: 'proxy.request',
    target: { type: 'proxy', ids: [randomUUID()] },
    outcome: 'success',
    status: 200,
    traceId: 'trace-1',
    clientIp: '203.0.113.7',
    request: { method: 'POST', route: '/proxy' },
    tokenIds: ['tok_abc', randomUUID()],
    destination: { origin: 'https://api.example.com:8443', method: 'POST', status: 201 },
    durationMs: 12,
    ...overrides,
  }) as AuditEvent

t.test('a well-formed event passes, with and without optional fields', async (t) => {
  t.doesNotThrow(() => validateAuditEvent(valid()))
  t.doesNotThrow(() => validateAuditEvent({ tenantId: randomUUID(), actor: { kind: 'anonymous', id: null }, action: 'auth.failed', outcome: 'denied', status: 401, traceId: null, clientIp: null }))
  t.doesNotThrow(() => validateAuditEvent(valid({ clientIp: '2001:db8::1', transform: 'mask', permission: 'token:read' })))
})

t.test('nothing but ids and codes fits: every way of smuggling data in is refused', async (t) => {
  const refused: [string, Record<string, unknown>][] = [
    ['a free-form field', { message: `card ${CARD}` }],
    ['a free-form field inside the actor', { actor: { kind: 'application', id: randomUUID(), key: 'key_abc' } }],
    ['an action not in the list', { action: 'token.peek' }],
    ['an actor kind not in the list', { actor: { kind: 'user', id: randomUUID() } }],
    ['an actor id that is not a uuid (a key)', { actor: { kind: 'application', id: 'key_0123456789abcdefghijklmnopqrstuvwxyz' } }],
    ['a non-token target id that is not a uuid', { target: { type: 'application', ids: [CARD] } }],
    ['a token id with whitespace (data, not an id)', { target: { type: 'token', ids: ['4242 4242 4242 4242'] } }],
    ['a token id that is JSON', { tokenIds: ['{"number":"4242424242424242"}'] }],
    ['a token id too long to be one', { tokenIds: ['x'.repeat(401)] }],
    ['a destination with a path', { destination: { origin: 'https://api.example.com/v1/cards/4242424242424242', method: 'POST' } }],
    ['a destination with a query', { destination: { origin: `https://api.example.com?card=${CARD}`, method: 'POST' } }],
    ['a destination with credentials', { destination: { origin: 'https://user:pass@api.example.com', method: 'POST' } }],
    ['a destination that is not http(s)', { destination: { origin: 'ftp://api.example.com', method: 'POST' } }],
    ['a method not in the list', { destination: { origin: 'https://api.example.com', method: 'BREW' } }],
    ['a route that is a path with data', { request: { method: 'GET', route: `/tokens/${CARD}?x=1` } }],
    ['a client IP that is not an address', { clientIp: CARD }],
    ['a trace id with spaces', { traceId: 'card 4242' }],
    ['an unknown permission', { permission: 'token:peek' }],
    ['a transform not in the list', { transform: 'decrypt' }],
    ['a status out of range', { status: 42 }],
    ['a negative duration', { durationMs: -1 }],
    ['a tenant that is not a uuid', { tenantId: 'default' }],
  ]
  for (const [label, overrides] of refused) {
    const err = t.throws(() => validateAuditEvent(valid(overrides)), AuditEventError, label) as Error
    t.notMatch(err.message, CARD, `${label}: the message does not repeat the value`)
  }
})
