/**
 * Runs in the API process: turns a run's WireOutcome into what callers of the supervisor get.
 * Reactor failures become AppErrors; values are parsed from JSON here, exactly once.
 */
import { AppError } from '../../../errors/index.js'
import type { WireOutcome } from '../shared/protocol.js'

/** A value to present, or (from CustomHttpResponseError) a response to send as-is. */
export type ReactorOutcome = { kind: 'ok'; value: unknown } | { kind: 'response'; status: number; headers: Record<string, string>; body: unknown }

export function toOutcome(outcome: WireOutcome): ReactorOutcome {
  switch (outcome.kind) {
    case 'ok':
      return { kind: 'ok', value: parseJson(outcome.json) }
    case 'response':
      return { kind: 'response', status: outcome.status, headers: outcome.headers, body: parseJson(outcome.json) }
    case 'error':
      // Reactor-authored (or about Reactor output): for the caller, never for the logs.
      throw new AppError(outcome.code, { detail: outcome.detail, untrustedDetail: true })
  }
}

function parseJson(json: string): unknown {
  if (json === '') return undefined
  try {
    return JSON.parse(json)
  } catch {
    throw new AppError('reactor_error', { detail: 'The Reactor runtime returned a malformed result.' })
  }
}
