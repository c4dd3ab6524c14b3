import { Type } from '@sinclair/typebox'
import { StringEnum } from './common.js'

export const Liveness = Type.Object({ status: Type.Literal('ok') })

const State = StringEnum(['ok', 'degraded', 'down'])

export const Readiness = Type.Object({
  status: State,
  components: Type.Record(Type.String(), State, { description: 'database, vault, rate_limit, ...' }),
})
