/**
 * Shutdown state shared by `main.ts` (which drives it) and the app (readiness, access log).
 * `draining`: SIGTERM arrived, readiness is down and every answer closes its connection.
 * `cut`: the grace time is over and whatever still runs is being aborted.
 */
export class Drain {
  draining = false
  cut = false
}
