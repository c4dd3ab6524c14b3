import type { Config } from '../config/index.js'
import type { ProxyRecord } from '../store/index.js'
import type { Forwarder } from '../egress/forward.js'
import { createPipeline, registerPlugin, type Pipeline, type Registration } from './pipeline/index.js'
import { destinationHeadersPlugin } from './plugins/destination-headers/index.js'
import { detokenizePlugin, type TokenResolver } from './plugins/detokenize/index.js'
import type { CodeRunner } from '../reactors/code-host.js'
import { requestTransformPlugin, responseTransformPlugin } from './plugins/transform/index.js'
import type { TransformKind } from './plugins/transform/shapes.js'
import { createProxyService, type ProxyService } from './service.js'

/** What of a saved proxy shapes its pipeline. */
export type ProxyPipelineSpec = Pick<ProxyRecord, 'id' | 'tenant_id' | 'version' | 'request_transform_code' | 'response_transform_code' | 'configuration'>

/** The pipeline of each pre-configured proxy, and the ProxyService that runs it (proxies/ keeps the proxies themselves). */
export interface PreconfiguredPipelines {
  /** Registers (and so validates) every plugin's config: called on save, and when a proxy is loaded. */
  pipeline(proxy: ProxyPipelineSpec): Pipeline
  /** The proxy's own service: its pipeline around the shared forwarder. */
  service(proxy: ProxyPipelineSpec): ProxyService
}

/**
 * `/proxy` with `SVC-PROXY-KEY`: the same runner as the ephemeral proxy, over a plugin list of
 * the proxy's own. The plugins themselves are made once, here, at boot; each proxy only adds
 * its configs (its transform code and configuration).
 */
export function createPreconfiguredPipelines(deps: { forwarder: Forwarder; vault: TokenResolver; runner: CodeRunner; config: Config }): PreconfiguredPipelines {
  const { config } = deps
  const detokenize = detokenizePlugin(deps.vault)
  const destinationHeaders = destinationHeadersPlugin()
  const requestTransform = requestTransformPlugin(deps.runner)
  const responseTransform = responseTransformPlugin(deps.runner, { payloadMaxBytes: config.reactors.payloadMaxBytes })

  function pipeline(proxy: ProxyPipelineSpec): Pipeline {
    const registrations: Registration[] = [
      registerPlugin(detokenize, { maxTokens: config.expressions.maxTokens }),
      registerPlugin(destinationHeaders, {}),
    ]
    const transform = (code: string, which: TransformKind) => ({
      tenantId: proxy.tenant_id,
      reactorId: transformReactorId(proxy.id, which),
      version: proxy.version,
      code,
      configuration: proxy.configuration,
    })
    if (proxy.request_transform_code) registrations.push(registerPlugin(requestTransform, transform(proxy.request_transform_code, 'request')))
    if (proxy.response_transform_code) registrations.push(registerPlugin(responseTransform, transform(proxy.response_transform_code, 'response')))
    return createPipeline(registrations)
  }

  return {
    pipeline,
    service: (proxy) => createProxyService({ forwarder: deps.forwarder, pipeline: pipeline(proxy), policy: config.proxy }),
  }
}

export type { TransformKind }

/** The Reactor id a proxy's transform runs under: stable across saves (the version is what changes). */
export function transformReactorId(proxyId: string, which: TransformKind): string {
  return `${proxyId}:${which}`
}
