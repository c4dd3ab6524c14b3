/** The one registry of error codes: every AppError names one of these. */
export const errorCodes = {
  validation: { status: 400, title: 'One or more validation errors occurred.' },
  bad_request: { status: 400, title: 'The request is invalid.' },
  destination_refused: { status: 400, title: 'The destination is not allowed.' },
  unauthenticated: { status: 401, title: 'Authentication is required.' },
  forbidden: { status: 403, title: 'The key may not do this.' },
  not_found: { status: 404, title: 'The resource was not found.' },
  method_not_allowed: { status: 405, title: 'The method is not allowed on this resource.' },
  conflict: { status: 409, title: 'The request conflicts with the current state.' },
  idempotency_in_flight: { status: 409, title: 'A request with this idempotency key is still in progress.' },
  idempotency_withheld: { status: 409, title: 'The request with this idempotency key already completed; its answer is not replayed.' },
  payload_too_large: { status: 413, title: 'The payload is too large.' },
  unsupported_media_type: { status: 415, title: 'The content type is not supported.' },
  reactor_compile: { status: 422, title: 'The Reactor code does not compile.' },
  idempotency_mismatch: { status: 422, title: 'The idempotency key was used for a different request.' },
  rate_limited: { status: 429, title: 'Too many requests.' },
  internal: { status: 500, title: 'An internal error occurred.' },
  reactor_error: { status: 500, title: 'The Reactor failed.' },
  destination_unreachable: { status: 502, title: 'The destination could not be reached.' },
  unavailable: { status: 503, title: 'The service is unavailable.' },
  reactor_overloaded: { status: 503, title: 'The Reactor runtime is at capacity.' },
  destination_timeout: { status: 504, title: 'The destination did not answer in time.' },
  reactor_timeout: { status: 504, title: 'The Reactor did not finish in time.' },
} as const satisfies Record<string, { status: number; title: string }>

export type ErrorCode = keyof typeof errorCodes
