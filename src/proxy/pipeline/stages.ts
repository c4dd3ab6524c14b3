/**
 * The proxy's lifecycle after the destination is resolved, in order. The plugin interface, the
 * runner and registration are all derived from this one list, so a new stage is added here only.
 */
export const STAGES = ['beforeForward', 'afterForward'] as const

export type Stage = (typeof STAGES)[number]
