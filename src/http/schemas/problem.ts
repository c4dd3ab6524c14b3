import { Type } from '@sinclair/typebox'
import { errorCodes } from '../../errors/index.js'
import { problemType } from '../../errors/problem.js'

const registry = Object.entries(errorCodes)

/** RFC 9457 problem details, as every non-proxied error is answered; `type` is one of the registry's. */
export const Problem = Type.Object(
  {
    type: Type.Unsafe<string>({ type: 'string', enum: registry.map(([code]) => problemType(code as keyof typeof errorCodes)) }),
    title: Type.String(),
    status: Type.Integer({ minimum: 400, maximum: 599 }),
    detail: Type.Optional(Type.String({ description: 'Human text; never secrets, plaintext, SQL or stack traces.' })),
    errors: Type.Optional(Type.Record(Type.String(), Type.Array(Type.String()), { description: 'Field -> messages, on every validation failure.' })),
    trace_id: Type.Optional(Type.String({ description: 'The request id (also in the SVC-Trace-Id header).' })),
  },
  {
    description: ['Problem types:', '', '| type | status | title |', '|---|---|---|', ...registry.map(([code, e]) => `| \`${problemType(code as keyof typeof errorCodes)}\` | ${e.status} | ${e.title} |`)].join('\n'),
  },
)

/** The proxy's own failures (no SVC-PROXY-DESTINATION-STATUS): the problem wrapped. */
export const ProxyError = Type.Object({ proxy_error: Problem })
