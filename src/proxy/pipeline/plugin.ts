import type { JSONSchemaType } from 'ajv'
import type { Exchange, Respond } from './exchange.js'
import type { Stage } from './stages.js'

/** `void` continues with the next plugin; a Respond short-circuits the exchange. */
export type StageResult = void | Respond

export type StageHandler<C> = (exchange: Exchange, config: C) => Promise<StageResult>

/** One optional method per stage, named like the stage. */
export type StageHandlers<C> = { [S in Stage]?: StageHandler<C> }

/**
 * A proxy plugin in the Kong manner: a name, a priority (higher runs first) and one method per
 * stage it takes part in. `config` is validated against `configSchema` once, when registered.
 */
export interface ProxyPlugin<C> extends StageHandlers<C> {
  name: string
  priority: number
  configSchema: JSONSchemaType<C>
}
