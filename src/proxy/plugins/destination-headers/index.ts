import type { JSONSchemaType } from 'ajv'
import type { ProxyPlugin } from '../../pipeline/index.js'

/** No settings: the plugin only carries the caller's own headers. */
export type DestinationHeadersConfig = Record<string, never>

const configSchema = { type: 'object', properties: {}, required: [], additionalProperties: false } as unknown as JSONSchemaType<DestinationHeadersConfig>

const INJECTED = new Set(['svc-proxy-keep-alive', 'svc-proxy-connection'])

/**
 * SVC-PROXY-KEEP-ALIVE / SVC-PROXY-CONNECTION become `Keep-Alive` / `Connection` on the
 * destination call (the forwarder does the injecting). This plugin makes sure the caller's own
 * values, and only those, reach it: a plugin that rebuilt the headers (a request transform) has
 * dropped them, and must not be able to add its own SVC-* headers. Priority 100: after every
 * plugin that rewrites headers. Untouched headers (the usual case) cost one comparison.
 */
export function destinationHeadersPlugin(): ProxyPlugin<DestinationHeadersConfig> {
  return {
    name: 'destination-headers',
    priority: 100,
    configSchema,
    async beforeForward(exchange) {
      const { incoming, outgoing } = exchange
      if (outgoing.headers === incoming.headers) return
      const headers: string[] = []
      for (let i = 0; i + 1 < outgoing.headers.length; i += 2) {
        const name = outgoing.headers[i] as string
        if (!name.toLowerCase().startsWith('svc-')) headers.push(name, outgoing.headers[i + 1] as string)
      }
      for (let i = 0; i + 1 < incoming.headers.length; i += 2) {
        const name = incoming.headers[i] as string
        if (INJECTED.has(name.toLowerCase())) headers.push(name, incoming.headers[i + 1] as string)
      }
      outgoing.headers = headers
    },
  }
}
