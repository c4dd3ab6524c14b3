import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'

/**
 * What the collectors read when Prometheus scrapes: the counters and levels the components
 * already keep. Only names of fixed sets (route templates, outcomes, states) become labels;
 * never tenant ids, token ids, keys or raw paths.
 */
export interface MetricSources {
  reactors(): { coldStarts: number; warmStarts: number; restarts: number; outcomes: Readonly<Record<string, number>>; running: number; queued: number; shed: number; warm: number }
  rateLimit(): { degraded: boolean; store: string }
  database(): { used: number; free: number; pending: number; unavailable: Readonly<Record<string, number>> }
  audit(): { written: number; batches: number; dropped: number; queued: number; failing: boolean }
}

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]

/** One registry per process (passed through services), never prom-client's global default one. */
export function createMetrics() {
  const registry = new Registry()
  const registers = [registry]
  collectDefaultMetrics({ register: registry })

  let sources: MetricSources | undefined
  /** A counter whose value is read from a source at scrape time. */
  const readCounter = (name: string, help: string, labelNames: string[], read: (s: MetricSources) => Record<string, number> | number) =>
    new Counter({
      name, help, labelNames, registers,
      collect() {
        if (!sources) return
        this.reset()
        const value = read(sources)
        if (typeof value === 'number') this.inc(value)
        else for (const [label, n] of Object.entries(value)) this.inc({ [labelNames[0]!]: label }, n)
      },
    })
  const readGauge = (name: string, help: string, labelNames: string[], read: (s: MetricSources) => Record<string, number> | number) =>
    new Gauge({
      name, help, labelNames, registers,
      collect() {
        if (!sources) return
        const value = read(sources)
        if (typeof value === 'number') this.set(value)
        else for (const [label, n] of Object.entries(value)) this.set({ [labelNames[0]!]: label }, n)
      },
    })

  const metrics = {
    registry,
    httpRequests: new Counter({ name: 'tessera_http_requests_total', help: 'HTTP requests answered, by route template, method and status.', labelNames: ['route', 'method', 'status'], registers }),
    httpDuration: new Histogram({ name: 'tessera_http_request_duration_seconds', help: 'HTTP request latency, by route template, method and status.', labelNames: ['route', 'method', 'status'], buckets: LATENCY_BUCKETS, registers }),
    proxyDuration: new Histogram({ name: 'tessera_proxy_destination_duration_seconds', help: 'Destination call latency (until response headers), by status class (2xx..5xx, or error: no answer).', labelNames: ['status_class'], buckets: LATENCY_BUCKETS, registers }),
    detokenized: new Counter({ name: 'tessera_detokenized_tokens_total', help: 'Tokens detokenized (expressions in /detokenize, the proxy and Reactors), by permission.', labelNames: ['permission'], registers }),
    rateLimitDecisions: new Counter({ name: 'tessera_rate_limit_decisions_total', help: 'Rate-limit decisions, by outcome (allowed, limited) and, when limited, the scope.', labelNames: ['decision', 'scope'], registers }),
    /** Reads the components' own counters from now on (the services call it once, when all exist). */
    watch(from: MetricSources): void {
      sources = from
    },
  }

  readCounter('tessera_reactor_invocations_total', 'Reactor invocations, by outcome (ok, error, timeout, rejected: no slot in time).', ['outcome'], (s) => s.reactors().outcomes)
  readCounter('tessera_reactor_starts_total', 'Reactor invocations by start: warm (an isolate kept) or cold (a new isolate).', ['start'], (s) => ({ warm: s.reactors().warmStarts, cold: s.reactors().coldStarts }))
  readGauge('tessera_reactor_calls', 'Reactor calls now running or waiting for a slot (queue depth).', ['state'], (s) => ({ running: s.reactors().running, queued: s.reactors().queued }))
  readGauge('tessera_reactor_warm_isolates', 'Warm isolates kept by the runtime.', [], (s) => s.reactors().warm)
  readCounter('tessera_reactor_shed_total', 'Reactor calls refused because the queue was full or the wait ran out.', [], (s) => s.reactors().shed)
  readCounter('tessera_runtime_restarts_total', 'Restarts of the Reactor runtime child process.', [], (s) => s.reactors().restarts)
  readGauge('tessera_rate_limit_degraded', '1 while Redis is configured but unreachable and limits are counted per process (fallback).', [], (s) => (s.rateLimit().degraded ? 1 : 0))
  readGauge('tessera_db_pool_connections', 'Database pool connections, by state (used, free, pending: waiting to acquire).', ['state'], (s) => {
    const { used, free, pending } = s.database()
    return { used, free, pending }
  })
  readCounter('tessera_db_unavailable_total', 'Database waits that failed for availability (time-out, lost connection), by phase (acquire, query).', ['phase'], (s) => s.database().unavailable)
  readCounter('tessera_audit_events_written_total', 'Audit events written.', [], (s) => s.audit().written)
  readCounter('tessera_audit_batches_written_total', 'Audit batches (transactions) written.', [], (s) => s.audit().batches)
  readCounter('tessera_audit_events_dropped_total', 'Audit events given up (could not be written or queued).', [], (s) => s.audit().dropped)
  readGauge('tessera_audit_queue_events', 'Audit events waiting to be written.', [], (s) => s.audit().queued)
  readGauge('tessera_audit_failing', '1 while audit writes are failing.', [], (s) => (s.audit().failing ? 1 : 0))

  return metrics
}

export type Metrics = ReturnType<typeof createMetrics>

/** `2xx` .. `5xx` for an answer's status. */
export const statusClass = (status: number): string => `${Math.floor(status / 100)}xx`
