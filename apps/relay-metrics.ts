// What a Relay process exposes on /metrics (docs/operations.md, Monitoring): one registry per
// process, so `relay start` shows every part in one page and a part run alone shows its own.
// Every metric Relay exports is defined here, with its labels and what their values may be
// (Prometheus conventions: `_total` counters, base units, no unbounded label such as an id or
// an address); ops/ (alert rules, the Grafana dashboard) names only these.
//
// Counted as it happens (cheap: a counter increment, a histogram observation):
//   relay_http_requests_total, relay_http_request_duration_seconds   by method, route pattern, status
//   relay_admissions_total          by result (accepted, suppressed, replayed, rejected) and code
//   relay_admission_duration_seconds  POST /v1/emails from arrival to answer, by result
//   relay_admission_flow_waits_total, relay_admission_flow_wait_seconds_total, relay_admission_backlog_records,
//   relay_admission_flow_waiting
//                                   sends held while the pipeline was behind (apps/services/admission-flow.ts)
//   relay_events_appended_total     events this process appended to the event store, by type
//   relay_feedback_reports_total    findings of reports received by the inbound server, by kind and effect
//   relay_inbound_refused_total     sessions and reports the inbound server refused, by reason: for want of room,
//                                   or at RCPT as their return path does not verify
//   relay_retention_runs_total, relay_retention_last_success_timestamp_seconds, relay_retention_removed_total
//   relay_domain_rechecks_total, relay_domains_failed_total, relay_domain_recheck_runs_total
//                                   the periodic DNS re-check of verified sending domains (apps/services/domain-recheck.ts)
// Declared here, set by the parts that own them (see each definition):
//   relay_part_up, relay_part_last_progress_seconds, relay_part_work_waiting, relay_part_ready
//                                   liveness of each long-running part of this process (and of its pipeline
//                                   thread), read at each scrape (apps/liveness.ts); ready is /readyz's verdict
//   relay_store_ready               by store (event_store, document_store, log): /readyz's verdict of each store
//                                   it checks (apps/liveness.ts judgeStore), read at each scrape
//   relay_inbound_connections       the inbound server's open SMTP connections, read at each scrape
//   relay_delivery_attempts_total, relay_delivery_latency_seconds                 the sender (apps/services/delivery/outcome-report.ts)
//   relay_webhook_attempts_total                                                  the webhooks dispatcher
//   relay_dispatch_run_failures_total  by part: the parts with a dispatcher (sender, webhooks), from 0 at their start
//   relay_worker_thread_start_failures_total, relay_worker_pool_start_failing
//                                   by pool (compose, template_rendering, template_compilation, password_hashing,
//                                   dkim_key_generation, report_parsing): threads that failed to start, and whether
//                                   the pool is refusing its jobs for that now
//                                   (apps/worker-thread-reports.ts); made at a pool's first failure
// Read at each scrape (collectors, bounded by COLLECT_TIMEOUT_MS):
//   relay_forwarder_lag             events in the event store after the forwarder's saved checkpoint (up to
//                                   FORWARDER_LAG_CAP): any process shows it, also while the forwarder is down;
//                                   0 where the log serves the events topic from the event store (Log.followsEventStore)
//   relay_log_end_offset, relay_consumer_committed_offset, relay_consumer_lag
//                                   every processor's consumer group on the events topic, per partition:
//                                   any process can be scraped for it, also while that processor is down
//   relay_parked_events             parked events by processor (relay parked list)
//   relay_delivery_open_claims, relay_delivery_oldest_open_claim_age_seconds
//                                   claims without an outcome (the sender's schedule: steps takeover and recover)
//   relay_site_rate_per_minute, relay_site_limit_per_minute, relay_site_paused_seconds, relay_site_throttles
//                                   each sender instance's recipient sites as it last reported them: its 20
//                                   busiest and up to 50 a shaping rule applies to, the rest as site="other"
//                                   (apps/services/delivery/sites.ts siteSeries; every site: relay sites)
//   relay_metrics_collector_up      0 when a collector failed or timed out (its series are then left out);
//                                   collector="pipeline_thread": 0 when the pipeline thread's registry did not
//                                   answer in time (its last answer is shown instead: its counters never go down)
//   process_*, nodejs_*             the process: start time, CPU, resident memory, heap, event-loop delay
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import {
  MetricsRegistry, PROMETHEUS_CONTENT_TYPE, type Counter, type CounterChild, type Gauge, type GaugeChild, type Histogram, type HistogramChild,
  type RegistrySnapshot,
} from '../infra/metrics/registry.ts';
import type { DocumentStore } from '../infra/ports/document-store.ts';
import type { EventStore } from '../infra/ports/event-store.ts';
import { partitionLag, type Log } from '../infra/ports/log.ts';
import { PROCESSORS } from './processors/registry.ts';
import { DEFAULT_LIMITS, serverOptionsOf } from './api/connection-limits.ts';
import { limitPipelining } from './api/pipelining.ts';
import { eventsTopic, groupOf } from './pipeline/topics.ts';
import { forwarderCheckpointId, type ForwarderCheckpoint } from './pipeline/forwarder.ts';
import { COLLECTIONS } from './services/collections.ts';
import { openClaimsSummary } from './services/delivery/work-items.ts';
import type { WebhookResultLabel } from './services/webhooks/attempt-result.ts';
import { countParked, rebuildGroup } from './services/parked-events.ts';
import { PROJECTIONS } from './services/projection-registry.ts';
import { siteSeries, siteSnapshots } from './services/delivery/sites.ts';

/** How long a scrape waits for a collector (a Kafka cluster or a store that does not answer). */
export const COLLECT_TIMEOUT_MS = 3000;

/** relay_forwarder_lag counts no further (on EventStoreDB, counting reads the events). */
export const FORWARDER_LAG_CAP = 10_000;

/** The route label of requests that matched no route (404s): raw URLs would make a series each. */
export const UNMATCHED_ROUTE = 'unmatched';

/** Processors and rebuilds that park events (as /readyz counts them). */
const PARKING_NAMES = [...PROCESSORS.map((p) => p.name), ...Object.keys(PROJECTIONS).map((name) => rebuildGroup(name).processor)];

export interface MetricsSources {
  log: Log;
  documents: DocumentStore;
  /** With it, relay_forwarder_lag is read at each scrape. */
  events?: EventStore;
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

/** Admission flow control (apps/services/admission-flow.ts). */
export interface AdmissionFlowMetrics {
  /** A send that waited for the pipeline: caught_up (it went ahead once the backlog was under the bound), timed_out (after the longest wait). */
  waited(outcome: 'caught_up' | 'timed_out', seconds: number): void;
  /** The watched groups' backlog as last read, in records. */
  readonly backlog: GaugeChild;
  /** Sends waiting now (set at each scrape by the process that holds them). */
  readonly waiting: GaugeChild;
}

/** POST /v1/emails from arrival to answer, by the admission's result. */
export interface AdmissionDurations {
  accepted: HistogramChild;
  suppressed: HistogramChild;
  replayed: HistogramChild;
  rejected: HistogramChild;
}

/**
 * What a finding of a report did: recorded (a new RecipientReported), repeated (nothing new of
 * its recipient: RecipientReportRepeated), duplicate (the same report was taken before).
 */
export const FEEDBACK_EFFECTS = ['recorded', 'repeated', 'duplicate'] as const;
export type FeedbackEffect = (typeof FEEDBACK_EFFECTS)[number];

/** What one retention pass removed, by kind (bodies: message bodies' content keys; outbox_copies: emails whose outbox files went). */
export type RetentionKind =
  | 'bodies' | 'outbox_copies' | 'webhook_deliveries' | 'work_items' | 'sessions' | 'invitations' | 'rate_limit_slots' | 'rate_limit_windows' | 'send_rate_slots' | 'sign_in_failures'
  | 'tls_session_counts' | 'tls_reports' | 'site_snapshots' | 'mta_sts_policies' | 'suppression_sources';

export interface RetentionMetrics {
  /** A pass that completed every step: counts it and sets the time of the last success. */
  succeeded(at: Date): void;
  failed(): void;
  removed(kind: RetentionKind, count: number): void;
}

/** What one re-check of a sending domain found (domain/domain-recheck.ts RecheckVerdict). */
export type DomainRecheckResult = 'passed' | 'wrong' | 'inconclusive';
const DOMAIN_RECHECK_RESULTS: readonly DomainRecheckResult[] = ['passed', 'wrong', 'inconclusive'];

/** The periodic re-check of DNS-verified sending domains, run with the retention part. */
export interface DomainRecheckMetrics {
  /** One domain re-checked, by what DNS showed. */
  rechecked(result: DomainRecheckResult): void;
  /** A domain the re-check failed: its records wrong at every re-check for the grace period. */
  failed(): void;
  /** A pass over the due domains that ended (ok) or threw (a store error; retried). */
  passed(ok: boolean): void;
}

/** A long-running part's liveness (forwarder, each processor, retention, inbound, ...). */
export interface PartMetrics {
  /** 1 while the part runs, 0 while it recovers from a failure or has stopped. */
  up(part: string): GaugeChild;
  /** Unix time (seconds) of the part's last progress: a record handled, a step done, a pass ended. */
  lastProgress(part: string): GaugeChild;
  /** 1 while the part has work waiting (lag, due items), 0 when idle: with lastProgress, "stuck". */
  workWaiting(part: string): GaugeChild;
  /**
   * 1 while /readyz counts the part ready, 0 while it does not (stopped, recovering or stuck past
   * the bound, or still starting): the same verdict (apps/liveness.ts), so a part stuck on one
   * record while it runs and progresses elsewhere shows here, not in up or lastProgress.
   */
  ready(part: string): GaugeChild;
}

/** The stores /readyz checks: relay_store_ready's label. */
export type StoreLabel = 'event_store' | 'document_store' | 'log';

/**
 * Why the inbound server refused a session or a report for want of room (the client is told
 * 4xx and may retry; a sender that gives up loses its report): too_many_connections (its
 * connections are all taken: 421), too_many_from_client (the client's network holds its share:
 * 421 4.7.0), parser_busy (reports waiting for a parser: 451 4.3.2), no_room (the bytes of the
 * reports in flight: 452 4.3.1, at MAIL FROM or at the end of DATA).
 */
export const INBOUND_ROOM_REFUSAL_REASONS = ['too_many_connections', 'too_many_from_client', 'parser_busy', 'no_room'] as const;
export type InboundRoomRefusalReason = (typeof INBOUND_ROOM_REFUSAL_REASONS)[number];

/**
 * Why the inbound server refused a report at RCPT, for good (550 5.1.1): its address is not in
 * the form of Relay's return paths (not_a_return_path: mail to made-up addresses, which the
 * internet sends any bounce domain); it is, but its MAC verifies under no key Relay holds
 * (unknown_return_path: a previous secret key dropped too early, a forgery, another domain's);
 * it names an email Relay did not accept (unknown_email) or a recipient the email does not have
 * (unknown_recipient). The last three lose a genuine report when Relay lost what verifies it.
 */
export const RETURN_PATH_REFUSAL_REASONS = ['not_a_return_path', 'unknown_return_path', 'unknown_email', 'unknown_recipient'] as const;
export type ReturnPathRefusalReason = (typeof RETURN_PATH_REFUSAL_REASONS)[number];

/** Every reason of relay_inbound_refused_total: for want of room (retried), then of the return path (final). */
export const INBOUND_REFUSAL_REASONS = [...INBOUND_ROOM_REFUSAL_REASONS, ...RETURN_PATH_REFUSAL_REASONS] as const;
export type InboundRefusalReason = (typeof INBOUND_REFUSAL_REASONS)[number];

/** The inbound server's load: its refusals, counted as they happen, and its connections, set at each scrape. */
export interface InboundMetrics {
  refused(reason: InboundRefusalReason): CounterChild;
  readonly connections: GaugeChild;
}

/** Transports (RELAY_DELIVERY) and recipient outcomes of delivery attempts. */
export type DeliveryTransportLabel = 'outbox' | 'smtp' | 'mx';
export type DeliveryOutcomeLabel = 'sent' | 'delivered' | 'deferred' | 'hard_bounced' | 'soft_bounced' | 'failed' | 'unknown';

/**
 * The sender's metrics, declared here and set by the sender's dispatcher.
 * attempts: one per recipient and attempt. outcome: sent (a smarthost or the outbox took it),
 * delivered (the recipient's MX took it), deferred (4xx or no answer: retried), bounced (5xx
 * from the recipient's MX), failed (given up: retries exhausted, content expired, refused by the
 * smarthost), unknown (delivery_unknown: the sender died mid-transaction).
 */
export interface DeliveryMetrics {
  attempts(transport: DeliveryTransportLabel, outcome: DeliveryOutcomeLabel): CounterChild;
  /** From EmailAccepted to the recipient's first sent or delivered outcome. */
  latency(transport: DeliveryTransportLabel): HistogramChild;
  /** Claims (DeliveryClaimed) without an outcome yet, and the age of the oldest: read at each scrape (the open_claims collector). */
  readonly openClaims: GaugeChild;
  readonly oldestOpenClaimAge: GaugeChild;
}

export { webhookResultOf, type WebhookResultLabel } from './services/webhooks/attempt-result.ts';

export interface RelayMetrics {
  registry: MetricsRegistry;
  /** The counters of a route pattern ('/v1/emails/:id'), or of UNMATCHED_ROUTE. */
  route(pattern: string): RouteMetrics;
  admissions: AdmissionCounters;
  admissionDurations: AdmissionDurations;
  admissionFlow: AdmissionFlowMetrics;
  /** The counter of appended events of this type. */
  eventsAppended(type: string): CounterChild;
  /** kind: the finding's outcome (hard_bounced, soft_bounced, delayed, delivered, complained, undetermined). */
  feedbackReports(kind: string, effect: FeedbackEffect): CounterChild;
  retention: RetentionMetrics;
  domainRecheck: DomainRecheckMetrics;
  parts: PartMetrics;
  /**
   * 1 while /readyz counts the store ready, 0 while it does not (it does not answer, or takes no
   * writes: a full disk, a failed sync, its write lock held by another process): the same
   * verdict (apps/liveness.ts judgeStore), set at each scrape by the process that checks it.
   */
  storeReady(store: StoreLabel): GaugeChild;
  inbound: InboundMetrics;
  delivery: DeliveryMetrics;
  webhookAttempts(result: WebhookResultLabel): CounterChild;
  /**
   * Runs of a part's due items (apps/pipeline/dispatcher.ts) that threw before they rescheduled
   * their item, or ended without rescheduling it, by part: `sender` (delivery steps), `webhooks` (webhook attempts). Each such item
   * is run again after a back-off; the loop goes on, so without this only the log would tell.
   */
  dispatchRunFailures(part: string): CounterChild;
  /** Worker-thread pools whose threads fail to start (apps/worker-thread-reports.ts). */
  workerThreads: { startFailures(pool: string): CounterChild; startFailing(pool: string): GaugeChild };
  /**
   * Another registry of the same families to show on this page (the pipeline thread's; its
   * `collector` label, default pipeline_thread), asked at each scrape; null when it could not
   * answer in time. Its last answer is shown then, and relay_metrics_collector_up{collector}
   * is 0: left out, its counters would go down for a scrape, which Prometheus reads as a reset
   * (rate() and increase() would count their whole value again once it answers).
   */
  include(source: () => Promise<RegistrySnapshot | null>, collector?: string): void;
  /** The page /metrics serves. */
  render(): Promise<string>;
}

/** Children of one label, cached by its value: no key is built after the first use. */
function byValue<C>(family: { labels(...values: string[]): C }, fixed: string[] = []): (value: string) => C {
  const children = new Map<string, C>();
  return (value) => {
    let child = children.get(value);
    if (child === undefined) {
      child = family.labels(...fixed, value);
      children.set(value, child);
    }
    return child;
  };
}

/** Children of two labels, cached. */
function byPair<C>(family: { labels(...values: string[]): C }): (a: string, b: string) => C {
  const children = new Map<string, C>();
  return (a, b) => {
    const key = `${a}\u001f${b}`;
    let child = children.get(key);
    if (child === undefined) {
      child = family.labels(a, b);
      children.set(key, child);
    }
    return child;
  };
}

/** Latencies from seconds to hours: the time an email waits for its first delivery includes retries. */
const DELIVERY_LATENCY_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 21_600, 86_400];

/** The standard process metrics (the names Prometheus' client libraries use), read at each scrape. */
function processMetrics(registry: MetricsRegistry): void {
  registry.gauge('process_start_time_seconds', 'Start time of the process since the Unix epoch, in seconds.')
    .labels().set(Math.round((Date.now() - performance.now()) / 10) / 100);
  const user = registry.counter('process_cpu_user_seconds_total', 'User CPU time spent by the process, in seconds.').labels();
  const system = registry.counter('process_cpu_system_seconds_total', 'System CPU time spent by the process, in seconds.').labels();
  const total = registry.counter('process_cpu_seconds_total', 'User and system CPU time spent by the process, in seconds.').labels();
  const rss = registry.gauge('process_resident_memory_bytes', 'Resident memory size of the process, in bytes.').labels();
  const heap = registry.gauge('nodejs_heap_used_bytes', 'V8 heap in use by the main thread, in bytes.').labels();
  const lagP99 = registry.gauge('nodejs_eventloop_lag_p99_seconds', 'The 99th percentile of the main event loop\'s delay since the last scrape, in seconds.').labels();
  const lagMax = registry.gauge('nodejs_eventloop_lag_max_seconds', 'The longest delay of the main event loop since the last scrape, in seconds.').labels();
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  registry.collect(() => {
    const cpu = process.cpuUsage();
    // Counters only go up: set them to the cumulative value read now.
    user.value = cpu.user / 1e6;
    system.value = cpu.system / 1e6;
    total.value = (cpu.user + cpu.system) / 1e6;
    rss.set(process.memoryUsage.rss());
    heap.set(process.memoryUsage().heapUsed);
    lagP99.set(delay.count > 0 ? delay.percentile(99) / 1e9 : 0);
    lagMax.set(delay.count > 0 ? delay.max / 1e9 : 0);
    delay.reset();
  });
}

/**
 * The registry of one process; with sources, also the consumer-group and parked-event
 * collectors. `process: false` leaves out the process metrics (a worker thread's registry,
 * whose process the main thread's registry already reports).
 */
export function createRelayMetrics(sources?: MetricsSources, options: { process?: boolean } = {}): RelayMetrics {
  const registry = new MetricsRegistry();
  const requests = registry.counter('relay_http_requests_total', 'HTTP requests answered, by method, route pattern and status.', ['method', 'route', 'status']);
  const duration = registry.histogram('relay_http_request_duration_seconds', 'Time from a request\'s arrival to its response, by method, route pattern and status.', ['method', 'route', 'status']);
  const admissions = registry.counter('relay_admissions_total', 'POST /v1/emails outcomes: accepted (queued), suppressed, replayed (idempotent retry), rejected (by error code).', ['result', 'code']);
  const admissionSeconds = registry.histogram('relay_admission_duration_seconds', 'POST /v1/emails from arrival to answer, by result (accepted, suppressed, replayed, rejected), in seconds.', ['result']);
  const flowWaits = registry.counter('relay_admission_flow_waits_total',
    'Sends that waited for the pipeline to catch up before admission, by outcome (caught_up: the backlog fell under RELAY_ADMISSION_BACKLOG; timed_out: it did not within RELAY_ADMISSION_MAX_WAIT_MS, and the send went ahead).', ['outcome']);
  const flowWaitSeconds = registry.counter('relay_admission_flow_wait_seconds_total', 'Time sends spent waiting for the pipeline to catch up, in seconds.');
  const flowWaiting = registry.gauge('relay_admission_flow_waiting', 'Sends waiting now for the pipeline to catch up.');
  const flowBacklog = registry.gauge('relay_admission_backlog_records', 'Records of the events topic the slowest watched consumer group had not handled, as admission flow control last read it.');
  const appended = registry.counter('relay_events_appended_total', 'Events this process appended to the event store, by type.', ['type']);
  const feedback = registry.counter('relay_feedback_reports_total',
    'Findings of bounce and complaint reports received by the inbound server, by kind (hard_bounced, soft_bounced, delayed, delivered, complained, undetermined) and effect (recorded, repeated, duplicate).', ['kind', 'effect']);
  const retentionRuns = registry.counter('relay_retention_runs_total', 'Retention passes, by result (ok: every step completed; failed).', ['result']);
  const retentionLast = registry.gauge('relay_retention_last_success_timestamp_seconds', 'Unix time of the last retention pass that completed every step, in seconds.');
  const retentionRemoved = registry.counter('relay_retention_removed_total',
    'What retention removed, by kind (bodies, outbox_copies, webhook_deliveries, work_items, sessions, invitations, rate_limit_slots, rate_limit_windows, send_rate_slots, sign_in_failures, tls_session_counts, tls_reports, site_snapshots, mta_sts_policies, suppression_sources).', ['kind']);
  const rechecks = registry.counter('relay_domain_rechecks_total',
    'Re-checks of DNS-verified sending domains, by result (passed; wrong: a required record missing or wrong; inconclusive: a lookup failed, which changes nothing).', ['result']);
  const domainsFailed = registry.counter('relay_domains_failed_total',
    'Sending domains the re-check failed because their required records were missing or wrong at every re-check for the grace period (RELAY_DOMAIN_RECHECK_GRACE_MS).');
  const recheckRuns = registry.counter('relay_domain_recheck_runs_total', 'Passes of the domain re-check, by result (ok; failed: a store error, retried).', ['result']);
  const partUp = registry.gauge('relay_part_up', '1 while the part (forwarder, a processor, retention, inbound, ...) runs; 0 while it recovers from a failure or has stopped.', ['part']);
  const partProgress = registry.gauge('relay_part_last_progress_seconds', 'Unix time of the part\'s last progress (a record handled, a step done, a pass ended), in seconds.', ['part']);
  const partWaiting = registry.gauge('relay_part_work_waiting', '1 while the part has work waiting (lag, due items), 0 when it is idle.', ['part']);
  const partReady = registry.gauge('relay_part_ready',
    '1 while /readyz counts the part ready; 0 while it does not (stopped, recovering or stuck for too long, or still starting): /readyz\'s parts.<part>.reason says why.', ['part']);
  const storeReady = registry.gauge('relay_store_ready',
    '1 while /readyz counts the store (event_store, document_store, log) ready; 0 while it does not answer or takes no writes (a full disk, a failed sync, its write lock held by another process): /readyz\'s stores.<store>.reason says why.', ['store']);
  const inboundRefused = registry.counter('relay_inbound_refused_total',
    'Sessions and reports the inbound SMTP server refused, by reason: for want of room (too_many_connections, too_many_from_client, parser_busy, no_room), which the sender may retry, or give up and lose its report; ' +
    'or at RCPT for good, as their return path does not verify (not_a_return_path, unknown_return_path, unknown_email, unknown_recipient).', ['reason']);
  const inboundConnections = registry.gauge('relay_inbound_connections', 'Open connections to the inbound SMTP server.');
  const deliveryAttempts = registry.counter('relay_delivery_attempts_total',
    'Delivery attempts per recipient, by transport (outbox, smtp, mx) and outcome (sent, delivered, deferred, hard_bounced, soft_bounced, failed, unknown).', ['transport', 'outcome']);
  const deliveryLatency = registry.histogram('relay_delivery_latency_seconds',
    'Time from an email\'s acceptance to a recipient\'s first sent or delivered outcome, by transport, in seconds.', ['transport'], DELIVERY_LATENCY_BUCKETS);
  const openClaims = registry.gauge('relay_delivery_open_claims', 'Delivery claims without an outcome yet.');
  const oldestClaim = registry.gauge('relay_delivery_oldest_open_claim_age_seconds', 'Age of the oldest delivery claim without an outcome, in seconds (0 when there is none).');
  const webhookAttempts = registry.counter('relay_webhook_attempts_total',
    'Webhook delivery attempts, by result: 2xx, 3xx, 4xx, 5xx, or timeout, connection_refused, connection_reset, tls_error, dns_failure, unsafe_destination, network_error, signing_failed, endpoint_disabled, endpoint_deleted, endpoint_unsubscribed.', ['result']);
  const runFailures = registry.counter('relay_dispatch_run_failures_total',
    'Runs of due items that threw before they rescheduled their item, or ended without rescheduling it (either way retried after a back-off), by part (sender: delivery steps; webhooks: webhook attempts).', ['part']);
  const threadStartFailures = registry.counter('relay_worker_thread_start_failures_total',
    'Worker threads that failed to start (their module did not load, or the system refused a thread), by pool (compose, template_rendering, template_compilation, password_hashing, dkim_key_generation, report_parsing).', ['pool']);
  const poolStartFailing = registry.gauge('relay_worker_pool_start_failing',
    '1 while the pool\'s last thread start failed: its jobs are refused at once (template sends answer 503) while it tries again with a back-off; 0 once one starts.', ['pool']);
  const up = registry.gauge('relay_metrics_collector_up',
    '1 when the collector read its values for this scrape, 0 when it failed or timed out (pipeline_thread: the pipeline thread did not answer in time, and its last answer is shown).', ['collector']);
  if (options.process !== false) processMetrics(registry);
  const included: Array<() => Promise<RegistrySnapshot | null>> = [];
  const routes = new Map<string, RouteMetrics>();
  const rejected = byValue(admissions, ['rejected']);
  const removed = byValue(retentionRemoved);
  const runOk = retentionRuns.labels('ok');
  const runFailed = retentionRuns.labels('failed');
  // Every series from 0, so that the first failure after a start is an increase an alert sees.
  const recheckResults = new Map(DOMAIN_RECHECK_RESULTS.map((result) => [result, rechecks.labels(result)]));
  const domainsFailedTotal = domainsFailed.labels();
  const recheckRunResults = { ok: recheckRuns.labels('ok'), failed: recheckRuns.labels('failed') };
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
    admissionDurations: {
      accepted: admissionSeconds.labels('accepted'), suppressed: admissionSeconds.labels('suppressed'),
      replayed: admissionSeconds.labels('replayed'), rejected: admissionSeconds.labels('rejected'),
    },
    admissionFlow: (() => {
      const outcomes = { caught_up: flowWaits.labels('caught_up'), timed_out: flowWaits.labels('timed_out') };
      const seconds = flowWaitSeconds.labels();
      return {
        waited(outcome: 'caught_up' | 'timed_out', waited: number) {
          outcomes[outcome].inc();
          seconds.inc(waited);
        },
        backlog: flowBacklog.labels(),
        waiting: flowWaiting.labels(),
      };
    })(),
    eventsAppended: byValue(appended),
    feedbackReports: byPair(feedback),
    retention: {
      succeeded(at) {
        runOk.inc();
        retentionLast.labels().set(at.getTime() / 1000);
      },
      failed: () => runFailed.inc(),
      removed: (kind, count) => removed(kind).inc(count),
    },
    domainRecheck: {
      rechecked: (result) => recheckResults.get(result)!.inc(),
      failed: () => domainsFailedTotal.inc(),
      passed: (ok) => (ok ? recheckRunResults.ok : recheckRunResults.failed).inc(),
    },
    parts: { up: byValue(partUp), lastProgress: byValue(partProgress), workWaiting: byValue(partWaiting), ready: byValue(partReady) },
    storeReady: byValue(storeReady),
    // Series made by the process that runs the inbound server (their first use): none elsewhere.
    inbound: {
      refused: byValue(inboundRefused),
      get connections() { return inboundConnections.labels(); },
    },
    // Gauges without labels get their sample when first set: until then the page shows none.
    delivery: {
      attempts: byPair(deliveryAttempts),
      latency: byValue(deliveryLatency),
      get openClaims() { return openClaims.labels(); },
      get oldestOpenClaimAge() { return oldestClaim.labels(); },
    },
    webhookAttempts: byValue(webhookAttempts),
    dispatchRunFailures: byValue(runFailures),
    workerThreads: { startFailures: byValue(threadStartFailures), startFailing: byValue(poolStartFailing) },
    include(source, collector = 'pipeline_thread') {
      const status = up.labels(collector);
      let last: RegistrySnapshot | null = null;
      included.push(async () => {
        const snapshot = await source();
        status.set(snapshot === null ? 0 : 1);
        if (snapshot !== null) last = snapshot;
        return last;
      });
    },
    render: async () => registry.render((await Promise.all(included.map((source) => source()))).filter((s) => s !== null)),
  };
  if (sources) {
    const endOffset = registry.gauge('relay_log_end_offset', 'Offset the next record published to the partition gets.', ['topic', 'partition']);
    const committed = registry.gauge('relay_consumer_committed_offset', 'The consumer group\'s committed offset (the next record it will handle).', ['group', 'topic', 'partition']);
    const lag = registry.gauge('relay_consumer_lag', 'Records of the partition the consumer group has not handled yet.', ['group', 'topic', 'partition']);
    const parked = registry.gauge('relay_parked_events', 'Events parked by a processor or a rebuild (relay parked list).', ['processor']);
    const siteRate = registry.gauge('relay_site_rate_per_minute', 'Messages per minute a sender instance allows a recipient site now (adaptive; relay sites). site="other": the sum over the instance\'s sites not named.', ['site', 'sender_instance']);
    const siteLimit = registry.gauge('relay_site_limit_per_minute', 'The most a site\'s rate reaches (RELAY_SHAPING_FILE or the default). site="other": the sum.', ['site', 'sender_instance']);
    const sitePaused = registry.gauge('relay_site_paused_seconds', 'Seconds until the site\'s pause after throttling ends; 0 when not paused. site="other": the longest.', ['site', 'sender_instance']);
    const siteThrottles = registry.gauge('relay_site_throttles', 'Throttling replies from the site since the sender instance started. site="other": the sum.', ['site', 'sender_instance']);
    const topic = eventsTopic(sources.namespace);
    const groups = PROCESSORS.map((p) => groupOf(sources.namespace, p.name));
    collector(registry, up, 'log_offsets', [endOffset, committed, lag], async () => {
      const offsets = await sources.log.groupOffsets(topic, groups);
      return () => {
        for (const o of offsets) {
          const partition = String(o.partition);
          endOffset.labels(topic, partition).set(Number(o.end));
          if (o.committed !== null) committed.labels(o.group, topic, partition).set(Number(o.committed));
          lag.labels(o.group, topic, partition).set(partitionLag(o));
        }
      };
    });
    if (sources.events) {
      const events = sources.events;
      const forwarderLag = registry.gauge('relay_forwarder_lag', `Events in the event store after the forwarder's saved checkpoint (head minus its checkpoint), counted up to ${FORWARDER_LAG_CAP}.`);
      const checkpoints = sources.documents.collection<ForwarderCheckpoint>(COLLECTIONS.checkpoints);
      collector(registry, up, 'forwarder_lag', [forwarderLag], async () => {
        // A log that serves the topic from the event store holds every event once it is durable.
        const behind = sources.log.followsEventStore?.(topic)
          ? 0
          : await events.countAfter((await checkpoints.get(forwarderCheckpointId(sources.namespace)))?.position ?? null, FORWARDER_LAG_CAP);
        return () => forwarderLag.labels().set(behind);
      });
    }
    collector(registry, up, 'open_claims', [openClaims, oldestClaim], async () => {
      const { count, oldestClaimedAt } = await openClaimsSummary(sources.documents);
      return () => {
        openClaims.labels().set(count);
        oldestClaim.labels().set(oldestClaimedAt === null ? 0 : Math.max(0, (Date.now() - Date.parse(oldestClaimedAt)) / 1000));
      };
    });
    collector(registry, up, 'sites', [siteRate, siteLimit, sitePaused, siteThrottles], async () => {
      const snapshots = await siteSnapshots(sources.documents).find({ orderBy: [['_id', 'asc']], limit: 10_000 });
      return () => {
        for (const s of siteSeries(snapshots, Date.now())) {
          siteRate.labels(s.site, s.instance).set(s.rate);
          siteLimit.labels(s.site, s.instance).set(s.limit);
          sitePaused.labels(s.site, s.instance).set(s.pausedSeconds);
          siteThrottles.labels(s.site, s.instance).set(s.throttles);
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
    countAfter: (after, limit) => store.countAfter(after, limit),
    subscribeAll: (options, onEvent) => store.subscribeAll(options, onEvent),
    ping: () => store.ping(),
    ...(store.writeFailure ? { writeFailure: () => store.writeFailure!() } : {}),
    close: () => store.close(),
  };
}

/**
 * /metrics on a listener of its own (RELAY_METRICS_PORT), e.g. on an address only the
 * monitoring network reaches while the API's port is public. Serves nothing else.
 */
export async function listenForMetrics(metrics: RelayMetrics, host: string, port: number): Promise<{ url: string; close(): Promise<void> }> {
  // The API's bounds on time and on what one connection holds: a client that sends headers
  // slowly, stays silent, or pipelines scrapes it never reads is cut like one of the API's.
  // (Host is Node's to check here: nothing routes on it and no envelope is owed.)
  const limits = DEFAULT_LIMITS;
  const server = createServer({ ...serverOptionsOf(limits).http, requireHostHeader: true }, (request, response) => {
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
  server.keepAliveTimeout = limits.keepAliveTimeoutMs;
  server.setTimeout(limits.idleTimeoutMs);
  limitPipelining(server, { inProgress: limits.requestsInProgress, waiting: limits.requestsWaiting, closeMs: limits.unauthenticatedLingerMs }, tooManyScrapes);
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
    // Every connection goes: one that has sent nothing yet is not idle to Node and would hold
    // the stop until its header timeout; a scrape cut short is retried at the next interval.
    close: () => new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    }),
  };
}

function tooManyScrapes(_request: IncomingMessage, response: ServerResponse): void {
  response.writeHead(503, { 'content-type': 'text/plain; charset=utf-8', 'retry-after': '1', connection: 'close' })
    .end('too many requests outstanding on this connection\n');
}
