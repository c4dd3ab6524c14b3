import { CliError, EXIT_USAGE } from './cli-error.js'

/** A commander parser for an integer option within `[min, max]`; anything else is a usage error (exit 2). */
export function integerOption(flag: string, min: number, max: number): (value: string) => number {
  return (value) => {
    const n = Number(value)
    if (value.trim() === '' || !Number.isInteger(n) || n < min || n > max) throw new CliError(`${flag} must be an integer from ${min} to ${max}`, EXIT_USAGE)
    return n
  }
}
