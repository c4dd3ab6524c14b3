import type { Principal } from '../auth/principal.js'
import { AppError, type FieldErrors } from '../errors/index.js'
import type { DestinationPolicy } from '../egress/destination-policy.js'
import { buildDestination } from '../egress/destination-url.js'
import { transformReactorId, type TransformKind } from '../proxy/preconfigured-proxy.js'
import { binderOf, type CodeHost, type CodeList, type CodePiece } from '../reactors/code-host.js'
import { changeStamp, type ProxyRecord } from '../store/index.js'

/** A pre-configured proxy as `POST /proxies` and `PUT /proxies/{id}` send it. */
export interface ProxyInput {
  name: string
  destination_url: string
  request_transform?: { code: string }
  response_transform?: { code: string }
  configuration?: Record<string, string>
  application?: { id: string } | null
  require_auth?: boolean
}

const KINDS: readonly TransformKind[] = ['request', 'response']

/**
 * Everything a call would trip over is checked on save: destination, Application, code (the
 * plugin configs are checked by the service, on the record). The bound Application acts for the
 * transforms' code and, without require_auth, for whoever holds the proxy key: its grants must
 * be within the caller's own.
 */
export async function checkProxyInput(caller: Principal, input: ProxyInput, deps: { host: CodeHost; policy: DestinationPolicy }): Promise<void> {
  const errors: FieldErrors = {}
  const destinationError = checkDestination(input.destination_url, deps.policy)
  if (destinationError) errors.destination_url = [destinationError]
  if (!input.application && input.require_auth === false) errors.application = ['is required when require_auth is false']
  const pieces = KINDS.flatMap((kind): CodePiece[] => {
    const code = codeOf(input, kind)
    return code === null ? [] : [{ code, field: `${kind}_transform.code`, label: `${kind}_transform` }]
  })
  await deps.host.check(caller, { pieces, application: input.application, keyActsAsApplication: input.require_auth === false }, errors)
}

/** The columns an input sets, as `caller` changes them now. */
export function proxyFields(caller: Principal, input: ProxyInput) {
  return {
    name: input.name,
    destination_url: input.destination_url,
    request_transform_code: codeOf(input, 'request'),
    response_transform_code: codeOf(input, 'response'),
    configuration: input.configuration ?? {},
    application_id: input.application?.id ?? null,
    bound_by: binderOf(caller),
    require_auth: input.require_auth ?? true,
    ...changeStamp(caller),
  }
}

/** A proxy's code in the order the code host compares versions by. */
export function proxyCode(proxy: ProxyInput | ProxyRecord): CodeList {
  if ('request_transform_code' in proxy) return [proxy.request_transform_code, proxy.response_transform_code]
  return KINDS.map((kind) => codeOf(proxy, kind))
}

/** Warm isolates of a transform whose code changed (or whose proxy went, `after` undefined) go. */
export function retireChangedTransforms(host: CodeHost, before: ProxyRecord, after: ProxyRecord | undefined): void {
  for (const kind of KINDS) {
    const field = kind === 'request' ? 'request_transform_code' : 'response_transform_code'
    if (after === undefined || before[field] !== after[field]) host.retire(transformReactorId(before.id, kind))
  }
}

function checkDestination(url: string, policy: DestinationPolicy): string | undefined {
  try {
    buildDestination(url, '', '', policy)
    return undefined
  } catch (err) {
    if (!(err instanceof AppError)) throw err
    return err.code === 'destination_refused' ? (err.detail ?? err.title) : 'must be an absolute https URL'
  }
}

function codeOf(input: ProxyInput, kind: TransformKind): string | null {
  return (kind === 'request' ? input.request_transform : input.response_transform)?.code ?? null
}
