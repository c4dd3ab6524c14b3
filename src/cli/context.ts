import type { Command } from 'commander'
import { ConfigError, loadConfig, type Config } from '../config/index.js'
import { keyHashSecretSource, requireSecret, SecretsError, type SecretName } from '../config/secrets.js'
import { openStore, type Store } from '../store/index.js'
import { checkKeyHashSecret, KeyHashSecretError } from '../vault/key-hash-secret-check.js'
import { CliError, EXIT_USAGE } from './cli-error.js'

/** What every command gets: the environment's configuration, and output it may be tested on. */
export interface CliContext {
  /** Unset: the process environment (loadConfig's default). */
  env?: Record<string, string | undefined>
  out(line: string): void
  /** Progress and notes: stderr, so stdout stays the result alone. */
  note(line: string): void
}

/** One file in commands/ registers one top-level command (with its subcommands) here. */
export interface CliCommand {
  register(program: Command, context: CliContext): void
}

export function cliConfig(context: CliContext): Config {
  try {
    return loadConfig(context.env)
  } catch (err) {
    if (err instanceof ConfigError) throw new CliError(err.message, EXIT_USAGE)
    throw err
  }
}

/**
 * Opens the configured database, runs `fn`, closes it. Never migrates nor creates one: a mistyped
 * SVC_DATA_DIR or DATABASE_URL is refused, not answered with a new, empty database.
 */
export async function withStore<T>(config: Config, fn: (store: Store) => Promise<T>): Promise<T> {
  const store = await openStore(config, { migrate: false })
  try {
    return await fn(store)
  } finally {
    await store.db.close()
  }
}

/** A secret the servers use; missing, it is a configuration error (exit 2), never generated. */
export function cliSecret(config: Config, name: SecretName): string {
  try {
    return requireSecret(config, name)
  } catch (err) {
    if (err instanceof SecretsError) throw new CliError(err.message, EXIT_USAGE)
    throw err
  }
}

/**
 * Refuses (exit 2) a key-hash secret other than the one the servers recorded: a key hashed under
 * it would never authenticate. Reads only: a command never records a check value, so one run with
 * a wrong secret cannot lock the servers' out.
 */
export async function checkCliKeyHashSecret(config: Config, store: Store, secret: string): Promise<void> {
  try {
    await checkKeyHashSecret(store, secret, { source: keyHashSecretSource(config) })
  } catch (err) {
    if (err instanceof KeyHashSecretError) throw new CliError(err.message, EXIT_USAGE)
    throw err
  }
}
