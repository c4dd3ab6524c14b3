import type { Config } from '../config/index.js'
import type { Forwarder } from '../egress/forward.js'
import { createPipeline, registerPlugin } from './pipeline/index.js'
import { destinationHeadersPlugin } from './plugins/destination-headers/index.js'
import { detokenizePlugin, type TokenResolver } from './plugins/detokenize/index.js'
import { createProxyService, type ProxyService } from './service.js'

/** `/proxy` with `SVC-PROXY-URL`: the shared forwarder behind the ephemeral plugin list, built once at boot. */
export function createEphemeralProxy(deps: { forwarder: Forwarder; vault: TokenResolver; config: Config }): ProxyService {
  const pipeline = createPipeline([
    registerPlugin(detokenizePlugin(deps.vault), { maxTokens: deps.config.expressions.maxTokens }),
    registerPlugin(destinationHeadersPlugin(), {}),
  ])
  return createProxyService({ forwarder: deps.forwarder, pipeline, policy: deps.config.proxy })
}
