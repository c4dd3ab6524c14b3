/** Waits for a condition (not for a time): polls until it holds, failing after `limitMs`. */
export async function until(condition: () => Promise<boolean> | boolean, what: string, limitMs = 15_000): Promise<void> {
  const deadline = Date.now() + limitMs
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

/** The value of a promise and how long it took. */
export async function timed<T>(promise: Promise<T>): Promise<{ value: T; ms: number }> {
  const start = Date.now()
  const value = await promise
  return { value, ms: Date.now() - start }
}

/**
 * Asks `get` until its answer is `done` (or `limitMs` passed) and returns the last answer, for
 * checks that cross processes: a change made in one process reaches another by Postgres
 * NOTIFY on that process's own connection, so "at once" means as soon as that is read.
 */
export async function eventually<T>(get: () => Promise<T>, done: (value: T) => boolean, limitMs = 5_000): Promise<T> {
  const deadline = Date.now() + limitMs
  let value = await get()
  while (!done(value) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 20))
    value = await get()
  }
  return value
}
