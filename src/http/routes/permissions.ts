import { permissions } from '../../auth/permissions.js'
import type { AppRouter } from '../context.js'
import { PermissionsQuery } from '../schemas/tenants.js'
import { validator } from '../schemas/validate.js'

const parseQuery = validator(PermissionsQuery, { query: true })

export function permissionsRoutes(router: AppRouter): void {
  router.get('/permissions', async (ctx) => {
    const { application_type: type } = parseQuery({ ...ctx.query })
    ctx.body = type ? permissions.filter((p) => p.application_types.includes(type)) : permissions
  })
}
