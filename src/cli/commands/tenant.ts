import { auditKeyring } from '../../audit/audit-keys.js'
import { createAuditLog } from '../../audit/audit-log.js'
import { apiKeyHasher } from '../../auth/api-keys.js'
import { AppError } from '../../errors/index.js'
import { CreateTenantBody } from '../../http/schemas/tenants.js'
import { validator } from '../../http/schemas/validate.js'
import { createLogger } from '../../logger.js'
import { recordWithoutRequest, tenantsService } from '../../tenants/service.js'
import { CliError, EXIT_USAGE } from '../cli-error.js'
import { checkCliKeyHashSecret, cliConfig, cliSecret, withStore, type CliCommand } from '../context.js'

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
        const keyHashSecret = cliSecret(config, 'key_hash_secret')
        const hasher = apiKeyHasher(keyHashSecret)
        // Its log lines (a failed write) go to stderr, so stdout stays the result alone.
        const logger = createLogger(config, { write: (line) => context.note(line.trimEnd()) })
        const created = await withStore(config, async (store) => {
          await checkCliKeyHashSecret(config, store, keyHashSecret)
          // A new tenant's settings are cached nowhere yet, so creating one invalidates nothing.
          const service = tenantsService({ store, hasher, settings: { invalidate: async () => undefined }, logger })
          const audit = createAuditLog({ store, keyring: auditKeyring(config.audit.secret, keyHashSecret), config: config.audit, logger })
          try {
            return await service.createRecordedTenant(name, undefined, recordWithoutRequest(audit))
          } catch (err) {
            throw creationFailure(name, err)
          } finally {
            await audit.close()
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

/**
 * As `POST /tenants`: the entries commit with the tenant, before the key is printed. If they
 * cannot be written no tenant stands (see `createRecordedTenant`) and no key is shown.
 */
function creationFailure(name: string, err: unknown): unknown {
  if (!(err instanceof AppError)) return err
  if (err.code === 'conflict') return new CliError(`a tenant named ${JSON.stringify(name)} exists`)
  if (err.code === 'unavailable') return new CliError(`tenant ${JSON.stringify(name)} could not be created (no key is shown): the audit log could not record it: ${err.message}`)
  return err
}
