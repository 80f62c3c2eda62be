// What a Relay process exposes on /metrics (README, Monitoring): one registry per process, so
// `relay start` shows every part in one page and a part run alone shows its own counters.
//
// Counted as it happens (cheap: a counter increment, a histogram observation):
//   relay_http_requests_total, relay_http_request_duration_seconds   by method, route pattern, status
//   relay_admissions_total          by result (accepted, suppressed, replayed, rejected) and code
//   relay_events_appended_total     events this process appended to the event store, by type
// Read at each scrape (collectors, bounded by COLLECT_TIMEOUT_MS):
//   relay_log_end_offset, relay_consumer_committed_offset, relay_consumer_lag
//                                   every processor's consumer group on the events topic, per partition:
//                                   any process can be scraped for it, also while that processor is down
//   relay_parked_events             parked events by processor (relay parked list)
//   relay_metrics_collector_up      0 when a collector failed or timed out (its series are then left out)
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  MetricsRegistry, PROMETHEUS_CONTENT_TYPE, type Counter, type CounterChild, type Gauge, type Histogram, type HistogramChild,
} from '../infra/metrics/registry.ts';
import type { DocumentStore } from '../infra/ports/document-store.ts';
import type { EventStore } from '../infra/ports/event-store.ts';
import type { Log } from '../infra/ports/log.ts';
import { PROCESSORS } from './processors/registry.ts';
import { eventsTopic, groupOf } from './pipeline/topics.ts';
import { countParked, rebuildGroup } from './services/parked-events.ts';
import { PROJECTIONS } from './services/projection-registry.ts';

/** How long a scrape waits for a collector (a Kafka cluster or a store that does not answer). */
export const COLLECT_TIMEOUT_MS = 3000;

/** The route label of requests that matched no route (404s): raw URLs would make a series each. */
export const UNMATCHED_ROUTE = 'unmatched';

/** Processors and rebuilds that park events (as /readyz counts them). */
const PARKING_NAMES = [...PROCESSORS.map((p) => p.name), ...Object.keys(PROJECTIONS).map((name) => rebuildGroup(name).processor)];

export interface MetricsSources {
  log: Log;
  documents: DocumentStore;
  /** RELAY_LOG_NAMESPACE: the events topic and the processors' consumer groups. */
  namespace: string;
}

/** The counters of one route pattern, per method and status (created at their first request). */
export class RouteMetrics {
  readonly #route: string;
  readonly #requests: Counter;
  readonly #duration: Histogram;
  readonly #byMethod = new Map<string, Map<number, { requests: CounterChild; duration: HistogramChild }>>();

  constructor(route: string, requests: Counter, duration: Histogram) {
    this.#route = route;
    this.#requests = requests;
    this.#duration = duration;
  }

  record(method: string, status: number, seconds: number): void {
    let byStatus = this.#byMethod.get(method);
    if (byStatus === undefined) {
      byStatus = new Map();
      this.#byMethod.set(method, byStatus);
    }
    let children = byStatus.get(status);
    if (children === undefined) {
      const code = String(status);
      children = { requests: this.#requests.labels(method, this.#route, code), duration: this.#duration.labels(method, this.#route, code) };
      byStatus.set(status, children);
    }
    children.requests.inc();
    children.duration.observe(seconds);
  }
}

export interface AdmissionCounters {
  accepted: CounterChild;
  suppressed: CounterChild;
  replayed: CounterChild;
  /** The counter of refusals with this error code (domain/errors.ts). */
  rejected(code: string): CounterChild;
}

export interface RelayMetrics {
  registry: MetricsRegistry;
  /** The counters of a route pattern ('/v1/emails/:id'), or of UNMATCHED_ROUTE. */
  route(pattern: string): RouteMetrics;
  admissions: AdmissionCounters;
  /** The counter of appended events of this type. */
  eventsAppended(type: string): CounterChild;
  /** The page /metrics serves. */
  render(): Promise<string>;
}

/** Children of one label, cached by its value: no key is built after the first use. */
function byValue(family: Counter, fixed: string[] = []): (value: string) => CounterChild {
  const children = new Map<string, CounterChild>();
  return (value) => {
    let child = children.get(value);
    if (child === undefined) {
      child = family.labels(...fixed, value);
      children.set(value, child);
    }
    return child;
  };
}

/** The registry of one process; with sources, also the consumer-group and parked-event collectors. */
export function createRelayMetrics(sources?: MetricsSources): RelayMetrics {
  const registry = new MetricsRegistry();
  const requests = registry.counter('relay_http_requests_total', 'HTTP requests answered, by method, route pattern and status.', ['method', 'route', 'status']);
  const duration = registry.histogram('relay_http_request_duration_seconds', 'Time from a request\'s arrival to its response, by method, route pattern and status.', ['method', 'route', 'status']);
  const admissions = registry.counter('relay_admissions_total', 'POST /v1/emails outcomes: accepted (queued), suppressed, replayed (idempotent retry), rejected (by error code).', ['result', 'code']);
  const appended = registry.counter('relay_events_appended_total', 'Events this process appended to the event store, by type.', ['type']);
  const routes = new Map<string, RouteMetrics>();
  const rejected = byValue(admissions, ['rejected']);
  const metrics: RelayMetrics = {
    registry,
    route(pattern) {
      let found = routes.get(pattern);
      if (found === undefined) {
        found = new RouteMetrics(pattern, requests, duration);
        routes.set(pattern, found);
      }
      return found;
    },
    // Present from the start, at 0, so that rates work from the first scrape.
    admissions: { accepted: admissions.labels('accepted', ''), suppressed: admissions.labels('suppressed', ''), replayed: admissions.labels('replayed', ''), rejected },
    eventsAppended: byValue(appended),
    render: () => registry.render(),
  };
  if (sources) {
    const up = registry.gauge('relay_metrics_collector_up', '1 when the collector read its values for this scrape, 0 when it failed or timed out.', ['collector']);
    const endOffset = registry.gauge('relay_log_end_offset', 'Offset the next record published to the partition gets.', ['topic', 'partition']);
    const committed = registry.gauge('relay_consumer_committed_offset', 'The consumer group\'s committed offset (the next record it will handle).', ['group', 'topic', 'partition']);
    const lag = registry.gauge('relay_consumer_lag', 'Records of the partition the consumer group has not handled yet.', ['group', 'topic', 'partition']);
    const parked = registry.gauge('relay_parked_events', 'Events parked by a processor or a rebuild (relay parked list).', ['processor']);
    const topic = eventsTopic(sources.namespace);
    const groups = PROCESSORS.map((p) => groupOf(sources.namespace, p.name));
    collector(registry, up, 'log_offsets', [endOffset, committed, lag], async () => {
      const offsets = await sources.log.groupOffsets(topic, groups);
      return () => {
        for (const o of offsets) {
          const partition = String(o.partition);
          const end = Number(o.end);
          const start = Number(o.start);
          endOffset.labels(topic, partition).set(end);
          if (o.committed !== null) committed.labels(o.group, topic, partition).set(Number(o.committed));
          // A group behind the oldest kept record continues there (as a Kafka consumer reset to earliest).
          lag.labels(o.group, topic, partition).set(Math.max(0, end - Math.max(start, o.committed === null ? start : Number(o.committed))));
        }
      };
    });
    collector(registry, up, 'parked_events', [parked], async () => {
      const counts = await countParked(sources.documents, PARKING_NAMES);
      return () => {
        for (const name of PARKING_NAMES) parked.labels(name).set(counts.byProcessor[name] ?? 0);
      };
    });
  }
  return metrics;
}

/**
 * A collector that reads, then sets its gauges in one go: a scrape shows what one read said,
 * nothing from an earlier one, and nothing when the read failed or took too long.
 */
function collector(registry: MetricsRegistry, up: Gauge, name: string, gauges: Gauge[], read: () => Promise<() => void>): void {
  const status = up.labels(name);
  registry.collect(async () => {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<null>((resolve) => {
      timer = setTimeout(() => resolve(null), COLLECT_TIMEOUT_MS);
    });
    const apply = await Promise.race([read().catch(() => null), timeout]).finally(() => clearTimeout(timer));
    for (const gauge of gauges) gauge.reset();
    status.set(apply ? 1 : 0);
    apply?.();
  });
}

/** The event store, with each appended event counted by type. */
export function countingAppends(store: EventStore, metrics: { eventsAppended(type: string): { inc(): void } }): EventStore {
  return {
    async append(streamId, events, options) {
      const result = await store.append(streamId, events, options);
      for (const event of events) metrics.eventsAppended(event.type).inc();
      return result;
    },
    readStream: (streamId, options) => store.readStream(streamId, options),
    readAll: (options) => store.readAll(options),
    subscribeAll: (options, onEvent) => store.subscribeAll(options, onEvent),
    ping: () => store.ping(),
    close: () => store.close(),
  };
}

/**
 * /metrics on a listener of its own (RELAY_METRICS_PORT), e.g. on an address only the
 * monitoring network reaches while the API's port is public. Serves nothing else.
 */
export async function listenForMetrics(metrics: RelayMetrics, host: string, port: number): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((request, response) => {
    const path = (request.url ?? '').split('?')[0];
    if (path !== '/metrics' || (request.method !== 'GET' && request.method !== 'HEAD')) {
      response.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('only /metrics is served here\n');
      return;
    }
    metrics.render().then(
      (page) => response.writeHead(200, { 'content-type': PROMETHEUS_CONTENT_TYPE }).end(request.method === 'HEAD' ? undefined : page),
      () => response.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end('metrics could not be rendered\n'),
    );
  });
  // Scrapers keep their connection; an idle one must not hold up shutdown.
  server.keepAliveTimeout = 5000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port: bound } = server.address() as AddressInfo;
  const shownHost = host.includes(':') ? `[${host}]` : host;
  return {
    url: `http://${shownHost}:${bound}`,
    close: () => new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeIdleConnections();
    }),
  };
}
