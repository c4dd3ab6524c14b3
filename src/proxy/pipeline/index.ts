export { STAGES, type Stage } from './stages.js'
export type { Caller, Exchange, ExchangeAudit, IncomingParts, OutgoingParts, Respond } from './exchange.js'
export type { ProxyPlugin, StageHandler, StageResult } from './plugin.js'
export { createPipeline, registerPlugin, type Pipeline, type Registration } from './runner.js'
