import { apiKeyHasher } from '../../auth/api-keys.js'
import { AppError } from '../../errors/index.js'
import { CreateTenantBody } from '../../http/schemas/tenants.js'
import { validator } from '../../http/schemas/validate.js'
import { tenantsService } from '../../tenants/service.js'
import { CliError, EXIT_USAGE } from '../cli-error.js'
import { cliConfig, cliSecret, withStore, type CliCommand } from '../context.js'

const parseCreate = validator(CreateTenantBody)

export const command: CliCommand = {
  register(program, context) {
    const tenant = program.command('tenant').description('manage tenants')
    tenant
      .command('create')
      .description('create a tenant and its management Application, and print the Application\'s key (shown once)')
      .argument('<name>', 'tenant name, unique, at most 200 characters')
      .option('--json', 'print {tenant, application, key} as JSON')
      .action(async (name: string, options: { json?: boolean }) => {
        try {
          parseCreate({ name })
        } catch {
          throw new CliError(`invalid tenant name ${JSON.stringify(name)}: 1 to 200 characters, no control characters`, EXIT_USAGE)
        }
        const config = cliConfig(context)
        const hasher = apiKeyHasher(cliSecret(config, 'key_hash_secret'))
        const created = await withStore(config, async (store) => {
          try {
            // A new tenant's settings are cached nowhere yet, so creating one invalidates nothing.
            return await tenantsService({ store, hasher, settings: { invalidate: async () => undefined } }).createTenant(name)
          } catch (err) {
            if (err instanceof AppError && err.code === 'conflict') throw new CliError(`a tenant named ${JSON.stringify(name)} exists`)
            throw err
          }
        })
        if (options.json) {
          return context.out(JSON.stringify({ tenant: { id: created.tenant.id, name: created.tenant.name }, application: { id: created.application.id, name: created.application.name }, key: created.key }, null, 2))
        }
        context.out(`tenant ${created.tenant.name} (${created.tenant.id})`)
        context.out(`management Application ${created.application.id}; its key (shown once):`)
        context.out(created.key)
      })
  },
}
