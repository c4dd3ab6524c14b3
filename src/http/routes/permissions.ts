import { permissionListing } from '../../auth/operations.js'
import type { AppRouter } from '../context.js'
import { PermissionsQuery } from '../schemas/tenants.js'
import { validator } from '../schemas/validate.js'

const parseQuery = validator(PermissionsQuery, { query: true })

/** Every permission, the Application types that act with it, and the operations that need it. */
export function permissionsRoutes(router: AppRouter): void {
  router.get('/permissions', async (ctx) => {
    const { application_type: type } = parseQuery({ ...ctx.query })
    ctx.body = type ? permissionListing.filter((p) => p.application_types.includes(type)) : permissionListing
  })
}
