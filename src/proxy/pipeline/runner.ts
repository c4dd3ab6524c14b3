import { Ajv } from 'ajv'
import type { Exchange, Respond } from './exchange.js'
import type { ProxyPlugin, StageResult } from './plugin.js'
import { STAGES, type Stage } from './stages.js'

type BoundHandler = (exchange: Exchange) => Promise<StageResult>

/** A plugin with its validated config, its type erased so one list can hold them all. */
export interface Registration {
  readonly name: string
  readonly priority: number
  readonly handlers: { readonly [S in Stage]?: BoundHandler }
}

export interface Pipeline {
  /** Plugin names in the order they run. */
  readonly plugins: readonly string[]
  /** Runs every handler of `stage` in priority order; the first Respond ends the stage. */
  run(stage: Stage, exchange: Exchange): Promise<Respond | undefined>
}

const ajv = new Ajv({ allErrors: true, strict: false, useDefaults: true })

/** Validates `config` now (boot), so a bad plugin configuration stops start-up instead of a request. */
export function registerPlugin<C>(plugin: ProxyPlugin<C>, config: C): Registration {
  const validate = ajv.compile(plugin.configSchema)
  if (!validate(config)) {
    throw new Error(`proxy plugin ${plugin.name}: invalid config: ${ajv.errorsText(validate.errors)}`)
  }
  const handlers: { [S in Stage]?: BoundHandler } = {}
  for (const stage of STAGES) {
    const handler = plugin[stage]
    if (handler) handlers[stage] = (exchange) => handler.call(plugin, exchange, config)
  }
  return { name: plugin.name, priority: plugin.priority, handlers }
}

/**
 * The ephemeral and the pre-configured proxy are this same runner over different plugin lists.
 * The per-stage lists are fixed here, so a request pays for a plain loop and nothing else.
 */
export function createPipeline(registrations: readonly Registration[]): Pipeline {
  const names = new Set<string>()
  for (const r of registrations) {
    if (names.has(r.name)) throw new Error(`proxy plugin ${r.name} is registered twice`)
    names.add(r.name)
  }
  // Array.prototype.sort is stable: equal priorities keep their registration order.
  const ordered = [...registrations].sort((a, b) => b.priority - a.priority)
  const byStage = {} as Record<Stage, BoundHandler[]>
  for (const stage of STAGES) byStage[stage] = ordered.flatMap((r) => r.handlers[stage] ?? [])
  return {
    plugins: ordered.map((r) => r.name),
    async run(stage, exchange) {
      for (const handler of byStage[stage]) {
        const result = await handler(exchange)
        if (result) return result
      }
      return undefined
    },
  }
}
