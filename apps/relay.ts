// Starts the parts of Relay a process runs. `relay start` runs them all over the embedded
// stores; in distributed mode each part runs in its own process (`relay api`,
// `relay forwarder`, `relay processor <name>`), over the same code.
import type { FastifyInstance } from 'fastify';
import { createLogger, type Logger } from '../infra/logging.ts';
import { ConfigError, ListenError, type RelayConfig } from '../infra/config.ts';
import { buildApi } from './api/server.ts';
import { startInbound } from './inbound/inbound-server.ts';
import { startForwarder } from './pipeline/forwarder.ts';
import { startProcessor, type ProcessorPolicy, type RunningProcessor } from './processors/processor.ts';
import { PROCESSORS, processorNamed, type ProcessorName } from './processors/registry.ts';
import { startRetention } from './pipeline/retention.ts';
import { Liveness } from '../infra/liveness.ts';
import { judgeStore, PartsLiveness, watchStoreWrites, withThreadWrites, type JudgedStore } from './liveness.ts';
import {
  countingAppends, createRelayMetrics, FEEDBACK_EFFECTS, INBOUND_REFUSAL_REASONS, listenForMetrics, type RelayMetrics, type RetentionKind, type StoreLabel,
} from './relay-metrics.ts';
import { REPORT_OUTCOMES } from '../domain/feedback/classify.ts';
import type { PruneReport } from './services/operational-retention.ts';
import { startPipelineThread, type PipelineThread, type ThreadStore } from './pipeline/pipeline-thread.ts';
import { eventsTopic, groupOf } from './pipeline/topics.ts';
import { openServices, openStores, wakeOtherThreads, type StoreOptions, type Stores } from './runtime.ts';
import type { FieldFillReport } from '../infra/sqlite/field-fills.ts';
import { AdmissionFlow, slowestGroupBacklog } from './services/admission-flow.ts';
import { emailsOf } from './services/email-stream.ts';
import { threadStartReport } from './worker-thread-reports.ts';
import { prepareStores } from './services/prepare-stores.ts';
import type { Services } from './services/services.ts';
import { startDomainRecheck } from './services/domain-recheck.ts';
import { StartAbandonedError, StartSteps, type StartingRelay } from './process-lifecycle.ts';

/**
 * retention: destroys message bodies past their seven days (apps/pipeline/retention.ts), and
 * re-checks verified sending domains' DNS (apps/services/domain-recheck.ts);
 * inbound: the feedback SMTP server (apps/inbound/inbound-server.ts).
 */
export type Part = 'api' | 'forwarder' | 'retention' | 'inbound' | ProcessorName;

/** Every part, in the order `relay start` starts them. */
export const ALL_PARTS: Part[] = ['forwarder', ...PROCESSORS.map((p) => p.name), 'retention', 'inbound', 'api'];

export interface RunningRelay {
  stores: Stores;
  services: Services;
  /** The HTTP server: the whole API, or only health routes for processor processes. */
  api: FastifyInstance | null;
  url: string | null;
  /** /metrics: on the HTTP server above, or on its own listener (RELAY_METRICS_PORT; metricsUrl is then its address). */
  metrics: RelayMetrics;
  metricsUrl: string | null;
  logger: Logger;
  /** The liveness of every long-running part of the process (apps/liveness.ts), as /readyz and /metrics show it. */
  liveness: PartsLiveness;
  /** Whether each running part is ready (apps/liveness.ts says when one is not), as /readyz shows them. */
  partsReady(): Promise<Record<string, boolean>>;
  /** Stops accepting requests, lets in-flight ones finish, commits consumer positions, closes stores. */
  stop(): Promise<void>;
  /** The first step of stop(): the sender starts no delivery from now on (its consumer and the rest go on); resolves once this thread's deliveries in flight ended (the pipeline thread's is asked). */
  stopClaiming(): Promise<void>;
  /** What a stop in progress waits for now (the API, a part, the pipeline thread, the stores); null before a stop and after it. */
  stopWaitingFor(): string | null;
}

interface Stoppable {
  stop(): Promise<void>;
  stopClaiming?(): Promise<void>;
}

export interface RelayOptions extends StoreOptions {
  now?: () => Date;
  /** Overrides of the processors' retry, park and stuck policy (apps/processors/processor.ts). */
  processorPolicy?: Partial<ProcessorPolicy>;
  /**
   * Runs the pipeline parts asked for (forwarder, processors, retention) on a worker thread of
   * their own, with their own store connections, so that they and the API use two cores
   * (`relay start`). They behave exactly as in a process of their own; /readyz and /metrics of
   * this process still cover them. The thread failing stops nothing by itself: onPipelineExit
   * says so (`relay start` then exits, for its supervisor to restart it). `now` is not carried
   * to the thread (a function cannot cross it); processorPolicy is.
   */
  pipelineThread?: boolean;
  onPipelineExit?: (error: Error) => void;
  /**
   * Benchmarks only: each part of this thread is started inside it (the API is built and
   * listens inside it), so that an AsyncLocalStorage set there follows all the part's work
   * (test/bench/sql-stats.ts counts SQL statements by part that way).
   */
  runPart?: <T>(part: Part, start: () => Promise<T>) => Promise<T>;
  /** @internal The pipeline thread's own process: no HTTP server, no process metrics. */
  inThread?: boolean;
}

/** Metric labels of what a retention pass prunes. */
const RETENTION_KINDS: Record<keyof PruneReport, RetentionKind> = {
  webhookDeliveries: 'webhook_deliveries', workItems: 'work_items', sessions: 'sessions', invitations: 'invitations',
  rateLimitSlots: 'rate_limit_slots', rateLimitWindows: 'rate_limit_windows', sendRateSlots: 'send_rate_slots',
  signInFailures: 'sign_in_failures', tlsSessionCounts: 'tls_session_counts', tlsReports: 'tls_reports', siteSnapshots: 'site_snapshots',
  mtaStsPolicies: 'mta_sts_policies', suppressionSources: 'suppression_sources',
};

/** The groups whose lag API clients feel: an email listed (projector) and sent (sender). */
const FLOW_GROUPS_BY_DEFAULT: readonly ProcessorName[] = ['projector', 'sender'];

/**
 * Admission flow control over the groups RELAY_ADMISSION_BACKLOG_GROUPS names, by default those
 * of FLOW_GROUPS_BY_DEFAULT this process runs (a process that runs neither cannot tell a group
 * deployed elsewhere from one not deployed at all, so it holds no send unless told which).
 */
function admissionFlowOf(config: RelayConfig, parts: readonly Part[], stores: Stores, metrics: RelayMetrics, logger: Logger): AdmissionFlow | undefined {
  const { maxBacklog, maxWaitMs, groups: named } = config.admissionFlow;
  for (const name of named ?? []) {
    if (!processorNamed(name)) throw new ConfigError('RELAY_ADMISSION_BACKLOG_GROUPS', `"${name}" is not a processor (${PROCESSORS.map((p) => p.name).join(', ')})`);
  }
  const watched = named ?? FLOW_GROUPS_BY_DEFAULT.filter((name) => parts.includes(name));
  if (maxBacklog === 0 || watched.length === 0) return undefined;
  const topic = eventsTopic(config.logNamespace);
  const groups = watched.map((name) => groupOf(config.logNamespace, name));
  let failing = false;
  const flow = new AdmissionFlow({
    maxBacklog, maxWaitMs,
    backlog: async () => {
      const records = await slowestGroupBacklog(stores.log, topic, groups);
      if (failing) logger.info({ part: 'api' }, 'admission flow control: the backlog can be read again');
      failing = false;
      return records;
    },
    onBacklog: (records) => metrics.admissionFlow.backlog.set(records),
    onWaited: (outcome, waitedMs) => metrics.admissionFlow.waited(outcome, waitedMs / 1000),
    onReadError: (error) => {
      if (!failing) logger.warn({ part: 'api', err: error }, 'admission flow control: the backlog cannot be read; sends go ahead without waiting');
      failing = true;
    },
  });
  metrics.registry.collect(() => metrics.admissionFlow.waiting.set(flow.waiting));
  return flow;
}

/**
 * The re-check of verified sending domains, run beside the retention passes: what it finds is
 * counted, and a domain that starts failing, fails or recovers is logged, naming it. Its own
 * failures (a store error) are logged and counted but leave the part's liveness alone: the
 * next pass retries, and sending must not stop over it.
 */
function startDomainRecheckOf(config: RelayConfig, stores: Stores, services: Services, metrics: RelayMetrics, logger: Logger, now: () => Date) {
  const part = 'retention';
  const { graceMs } = config.domainRecheck;
  return startDomainRecheck({
    documents: stores.documents, config, dns: services.dns, policy: config.domainRecheck, now,
    onRechecked: ({ domain, verdict, outcome, wrong }) => {
      metrics.domainRecheck.rechecked(verdict);
      const fields = { part, domainId: domain._id, domain: domain.name, workspaceId: domain.workspaceId };
      const records = wrong.map((r) => `${r.purpose} ${r.type} ${r.name}: ${r.status}`);
      if (outcome.change === 'started_failing') {
        const failsAt = new Date(Date.parse(outcome.failingSince!) + graceMs).toISOString();
        logger.warn({ ...fields, records, failsAt }, `sending domain fails its DNS re-check: a required record is missing or wrong; it stays verified, and fails at ${failsAt} unless a check passes before`);
      } else if (outcome.change === 'still_failing') {
        logger.info({ ...fields, records, failingSince: outcome.failingSince }, 'sending domain still fails its DNS re-check');
      } else if (outcome.change === 'failed') {
        metrics.domainRecheck.failed();
        logger.warn({ ...fields, records }, 'sending domain failed: its records were missing or wrong at every DNS re-check for the grace period; sends from it are refused (domain_not_verified) until it is verified again');
      } else if (outcome.change === 'recovered') {
        logger.info(fields, 'sending domain passes its DNS re-check again');
      }
    },
    onRotationChecked: ({ domain, completed, selector, retiredSelector }) => {
      if (!completed) return;
      logger.info({ part, domainId: domain._id, domain: domain.name, workspaceId: domain.workspaceId, selector, retiredSelector },
        `DKIM key rotation of ${domain.name} completed: DNS shows the new key's record (selector ${selector}), which signs from now on; keep the retired selector ${retiredSelector}'s record published a few days more`);
    },
    onPass: (report) => {
      metrics.domainRecheck.passed(true);
      if (report.rechecked > 0 || report.rotationsCompleted > 0) logger.debug({ part, ...report }, 'sending domains re-checked');
    },
    onError: (error) => {
      metrics.domainRecheck.passed(false);
      logger.error({ err: error, part }, 'domain re-check pass failed (will retry)');
    },
  });
}

/**
 * The embedded document store's fills of field columns (infra/sqlite/field-fills.ts), which the
 * first start after an upgrade runs before it listens: a line before and after each table's, so
 * that a long start says what it does; its batches at debug.
 */
function logFieldFill(logger: Logger): (report: FieldFillReport) => void {
  return (report) => {
    const { phase, ...fields } = report;
    if (phase === 'repair') {
      logger.warn(fields, `the document store may have been written by a version of Relay that does not keep its field columns (a rollback to a version from before 2026-11-28, or a directory from before the storage format stamp): the field columns of ${report.tables.length} table(s) are checked against their documents and filled again`);
    } else if (phase === 'start') {
      logger.info(fields, `filling field columns of ${report.table} from its documents (${report.rows} rows)`);
    } else if (phase === 'batch') {
      logger.debug(fields, `filled a batch of field columns of ${report.table}`);
    } else if (phase === 'done') {
      logger.info(fields, `filled field columns of ${report.table}`);
    } else {
      logger.info(fields, `stopped filling field columns of ${report.table}; the next start goes on from there`);
    }
  };
}

/** The parts `pipelineThread` moves to its thread: what reacts to events rather than to requests. */
export const PIPELINE_PARTS: readonly Part[] = ['forwarder', ...PROCESSORS.map((p) => p.name), 'retention'];

/**
 * Starts the parts. A stop that comes meanwhile (stopOnSignals) gives the start up through what
 * this returns: see StartingRelay.abandon.
 */
export function startRelay(config: RelayConfig, parts: readonly Part[], options: RelayOptions = {}): StartingRelay {
  const logger = createLogger({ level: config.logLevel, format: config.logFormat, base: options.inThread ? { thread: 'pipeline' } : {} });
  const steps = new StartSteps();
  let abandoned: (() => void) | null = null;
  const started = startParts(config, parts, options, logger, steps).then((relay) => {
    steps.current = null;
    return relay;
  }, (error: unknown) => {
    steps.current = null;
    // Before the start rejects: a caller awaiting it would report the start as failed.
    if (error instanceof StartAbandonedError) abandoned?.();
    throw error;
  });
  return Object.assign(started, {
    logger,
    waitingFor: () => steps.current,
    abandon(then: () => void) {
      abandoned = then;
      steps.abandon();
    },
  });
}

async function startParts(config: RelayConfig, parts: readonly Part[], options: RelayOptions, logger: Logger, steps: StartSteps): Promise<RunningRelay> {
  const threaded = options.pipelineThread === true ? parts.filter((part) => PIPELINE_PARTS.includes(part)) : [];
  if (threaded.length > 0 || options.inThread) wakeOtherThreads();
  // Only the forwarder publishes and only processors consume: a process without them (the API
  // alone) starts while the log is down, and reads it once it can (flow control and /metrics
  // treat a log not connected yet as one they cannot read).
  const usesLog = parts.some((part) => !threaded.includes(part) && (part === 'forwarder' || processorNamed(part) !== undefined));
  let logFailing = false;
  const stores = await openStores(config, {
    commitHold: options.commitHold, readFault: options.readFault, abandon: steps.signal, onFieldFill: logFieldFill(logger),
    logClientLines: ({ level, source, message, fields }) => logger[level]({ component: source, ...fields }, message),
    ...(usesLog ? {} : {
      logInBackground: {
        onRetry: (error: Error, failures: number, delayMs: number) => {
          if (!logFailing) logger.warn({ err: error }, `the log cannot be reached; trying again in ${delayMs} ms, then with a doubling wait (this process only reads consumer groups' offsets from it, and runs meanwhile)`);
          else logger.debug({ err: error, failures }, `the log still cannot be reached; trying again in ${delayMs} ms`);
          logFailing = true;
        },
        onConnected: () => {
          if (logFailing) logger.info('the log is connected');
          logFailing = false;
        },
      },
    }),
  });
  // A refused secret key must not leave the store connections holding the process open.
  // One registry per process: `relay start` shows every part on one page.
  // On the pipeline thread, the process's own metrics are the main thread's to report.
  const metrics = createRelayMetrics({ log: stores.log, documents: stores.documents, events: stores.events, namespace: config.logNamespace }, { process: !options.inThread });
  const opened = await openServices(config, stores, logger, (pool) => threadStartReport(pool, logger, metrics.workerThreads)).catch(async (error) => {
    await stores.close();
    throw error;
  });
  const running = new Map<Part, Stoppable>();
  const now = options.now ?? (() => new Date());
  const reportError = (part: Part) => (error: Error) => logger.error({ err: error, part }, `${part} error (will retry)`);
  // A part this process runs is listed, not ready, until it has started and reports for itself:
  // /readyz answers while the parts start (the listeners are bound first), and so does /metrics.
  const liveness = new PartsLiveness({ stuckAfterMs: options.processorPolicy?.stuckAfterMs, logger, expected: parts.filter((part) => part !== 'api') });
  let api: FastifyInstance | null = null;
  let url: string | null = null;
  // The pipeline thread's appends too, in its own registry: /metrics adds in its snapshot.
  const events = countingAppends(stores.events, metrics);
  // The email streams append through the counting store: /metrics counts their events.
  const services: Services = { ...opened, emails: emailsOf(events, opened.policies) };
  let metricsServer: { url: string; close(): Promise<void> } | null = null;
  let pipeline: PipelineThread | null = null;
  const inPart = <T>(part: Part, start: () => Promise<T>): Promise<T> => steps.run(part, () => (options.runPart ? options.runPart(part, start) : start()));
  const partsReady = async () => (await liveness.verdicts()).ready;
  // The parts' liveness on /metrics, read at each scrape, from the start on, with the verdict
  // /readyz gives; the pipeline thread's parts come through this process's view of them, not
  // the thread's own registry.
  if (!options.inThread) metrics.registry.collect(() => liveness.publish(metrics.parts));
  // The stores /readyz checks, judged alike for relay_store_ready at each scrape (the log only
  // where /readyz checks it: a process that uses it), and their writes watched for the log. The
  // pipeline thread writes to them on connections of its own: its writes failing (a lock, a full
  // disk seen by its writes only) makes them not ready as this thread's do.
  const written = (store: ThreadStore, judged: JudgedStore): JudgedStore => (threaded.length === 0 ? judged : withThreadWrites(judged, {
    thread: 'pipeline thread',
    failure: () => pipeline?.writeFailure(store) ?? null,
    ping: () => pipeline?.pingStore(store) ?? Promise.resolve(true),
  }));
  const writtenStores = { event_store: written('event_store', stores.events), document_store: written('document_store', stores.documents) };
  const checksLog = parts.some((part) => part !== 'api');
  const checkedStores: Partial<Record<StoreLabel, JudgedStore>> = { ...writtenStores, ...(checksLog ? { log: stores.log } : {}) };
  let stopStoreWatch: (() => void) | null = null;
  if (!options.inThread) {
    metrics.registry.collect(async () => {
      await Promise.all(Object.entries(checkedStores).map(async ([store, judged]) => metrics.storeReady(store as StoreLabel).set((await judgeStore(judged)).ready ? 1 : 0)));
    });
    stopStoreWatch = watchStoreWrites(writtenStores, logger);
  }
  try {
    logger.info({ adapters: stores.kinds, parts }, 'starting');
    // The pipeline thread opens the same keys: the process says it once.
    if (services.fileKeyKept && !options.inThread) {
      const { path, keyId, currentKeyId } = services.fileKeyKept;
      logger.warn({ keyFile: path, fileKeyId: keyId, currentKeyId }, `RELAY_SECRET_KEY is set and ${path} holds another key: that key is kept as a previous one, so what it sealed still opens and is re-sealed under RELAY_SECRET_KEY (docs/operations.md, "The secret key")`);
    }
    if (parts.includes('sender') && !threaded.includes('sender')) {
      logger.info({ delivery: config.delivery }, config.delivery === 'outbox'
        ? `delivery: outbox — messages are written to ${services.outboxDir} and not sent (set RELAY_DELIVERY=smtp or mx to send)`
        : `delivery: ${config.delivery}`);
    }
    // Before any listener: what it fills (the first start after an upgrade) is filled before a
    // read is served. A stop meanwhile cuts it short between batches (steps.signal, given to the
    // stores as `abandon`), and the next start goes on.
    await steps.run('stores', () => prepareStores(stores.documents));
    // Every listener first, before any part consumes, claims or sends: a port that is taken
    // stops the start here (one line naming the variable), with nothing delivered. Every process
    // answers /healthz and /readyz; only the api part serves the /v1 routes.
    if (!options.inThread) {
      const admissionFlow = parts.includes('api') ? admissionFlowOf(config, parts, stores, metrics, logger) : undefined;
      api = await inPart('api', () => buildApi({
        config,
        events,
        documents: stores.documents,
        services,
        now,
        metrics,
        admissionFlow,
        judgedStores: { events: writtenStores.event_store, documents: writtenStores.document_store },
        // Every long-running part, judged by one rule (apps/liveness.ts; apps/api/plugins/health.ts
        // says what turns /readyz to 503 and what does not); the reason is in the warn log too.
        readiness: async () => {
          const [verdicts, log] = await Promise.all([liveness.verdicts(), checkedStores.log ? judgeStore(checkedStores.log) : null]);
          return { checks: { ...verdicts.ready, ...(log === null ? {} : { log: log.ready }) }, parts: verdicts.parts };
        },
      }, { logger, routes: parts.includes('api') ? 'all' : 'health', metricsRoute: config.metrics.enabled && config.metrics.port === null }));
      const http = api;
      url = await bound('the HTTP server', config.host, config.port, { host: 'HOST', port: 'PORT' }, () => inPart('api', () => http.listen({ host: config.host, port: config.port })));
      logger.info({ url, parts }, 'listening');
      if (config.metrics.enabled && config.metrics.port !== null) {
        const { host, port } = config.metrics;
        metricsServer = await bound('the metrics server', host, port, { host: 'RELAY_METRICS_HOST', port: 'RELAY_METRICS_PORT' }, () => listenForMetrics(metrics, host, port));
        logger.info({ url: `${metricsServer.url}/metrics` }, 'metrics listening');
      }
    }
    if (parts.includes('inbound')) {
      const part = 'inbound';
      // Every series from 0: the first report after a start is then an increase an alert sees.
      for (const kind of REPORT_OUTCOMES) for (const effect of FEEDBACK_EFFECTS) metrics.feedbackReports(kind, effect);
      for (const reason of INBOUND_REFUSAL_REASONS) metrics.inbound.refused(reason);
      const tracker = new Liveness();
      liveness.add(part, tracker);
      const inbound = await bound('the feedback SMTP server', config.inbound.host, config.inbound.port, { host: 'RELAY_INBOUND_SMTP_HOST', port: 'RELAY_INBOUND_SMTP_PORT' }, () => inPart(part, () => startInbound({
        ...config.inbound, hostname: config.mailHost, events, emails: services.emails, documents: stores.documents, secrets: services.secrets, now,
        liveness: tracker,
        onError: reportError(part),
        onSessionError: (error) => logger.debug({ part, code: error.code, reason: error.message }, 'feedback SMTP session ended by an error of its connection (the client reset it, a STARTTLS handshake failed)'),
        onReport: ({ format, recorded, findings }) => {
          for (const finding of findings) metrics.feedbackReports(finding.outcome, finding.effect).inc();
          logger.info({ part, format, recorded }, 'report received');
        },
        onRefused: (reason) => metrics.inbound.refused(reason).inc(),
        onThreadStart: threadStartReport('report_parsing', logger, metrics.workerThreads),
        onRefusing: (reason, count) => logger.warn({ part, reason, refused: count },
          `the feedback SMTP server refused ${count} session(s) or report(s) for want of room (${reason}) since its last such line; senders retry later, and a sender that gives up loses its bounce or complaint report`),
        onReturnPathRefused: (reason, named) => logger.debug({ part, reason, ...named }, 'report refused at RCPT: its return path does not verify'),
        onReturnPathsRefusing: (reason, count, named) => logger.warn({ part, reason, refused: count, ...named },
          `the feedback SMTP server refused ${count} report(s) at RCPT whose return path does not verify (${reason}) since its last such line; their bounces and complaints are lost. Many unknown_return_path after a secret key rotation: put the previous key back in RELAY_SECRET_KEY_PREVIOUS (docs/operations.md, "The secret key")`),
      })));
      const server = inbound;
      metrics.registry.collect(() => metrics.inbound.connections.set(server.connections()));
      logger.info({ part, port: inbound.port }, `feedback SMTP server listening on ${config.inbound.host}:${inbound.port}`);
      running.set(part, inbound);
    }
    if (threaded.length > 0) {
      pipeline = await steps.run('pipeline thread', () => startPipelineThread({ config, parts: threaded, processorPolicy: options.processorPolicy }, {
        abandon: steps.signal,
        onExit: options.onPipelineExit ?? ((error) => logger.error({ err: error }, 'pipeline thread ended')),
      }));
      const thread = pipeline;
      metrics.include(() => thread.metrics());
      liveness.add('pipeline-thread', pipeline.liveness);
      liveness.addRemote(() => thread.partsStatus());
    }
    for (const part of parts) {
      if (threaded.includes(part) || part === 'api' || part === 'inbound') continue;
      if (part === 'forwarder') {
        const forwarder = await inPart(part, () => startForwarder({ events, log: stores.log, documents: stores.documents, namespace: config.logNamespace, logger }));
        liveness.add(part, forwarder.liveness);
        running.set(part, forwarder);
      } else if (part === 'retention') {
        // Listed once its first pass is over (startRetention waits for it), as a processor is once
        // started: /readyz must not answer 200 while startRelay is still running, or a SIGTERM sent
        // on that answer comes before stopOnSignals and kills the process mid-delivery.
        const tracker = new Liveness();
        const retention = await inPart(part, () => startRetention({
          documents: stores.documents, events, deliveryPolicy: services.policies.delivery, now, outboxDir: services.outboxDir, liveness: tracker,
          onShredded: (count) => {
            metrics.retention.removed('bodies', count);
            if (count > 0) logger.info({ part, count }, 'message bodies past retention destroyed');
          },
          onOutboxDeleted: (count) => {
            metrics.retention.removed('outbox_copies', count);
            if (count > 0) logger.info({ part, count }, 'outbox copies past retention deleted');
          },
          onPruned: (report) => {
            for (const [kind, count] of Object.entries(report)) metrics.retention.removed(RETENTION_KINDS[kind as keyof PruneReport], count);
            if (Object.values(report).some((n) => n > 0)) logger.info({ part, ...report }, 'operational data past its period removed');
          },
          onSwept: (at) => {
            tracker.progress();
            metrics.retention.succeeded(at);
          },
          onError: (error) => {
            tracker.failed(error);
            metrics.retention.failed();
            reportError(part)(error);
          },
        }));
        liveness.add(part, tracker);
        const rechecks = startDomainRecheckOf(config, stores, services, metrics, logger, now);
        running.set(part, { stop: () => Promise.all([retention.stop(), rechecks.stop()]).then(() => {}).finally(() => tracker.stopped()) });
      } else {
        const definition = processorNamed(part)!;
        const processor = await inPart(part, () => startProcessor(definition, {
          config, events, documents: stores.documents, log: stores.log, services, now,
          onError: reportError(part),
          onDebug: (message, fields) => logger.debug({ part, ...fields }, message),
          onInfo: (message, fields) => logger.info({ part, ...fields }, message),
          // Parked events and stuck processors: what an operator must look at.
          onWarning: (message, fields) => logger.warn({ part, ...fields }, message),
          onAlert: (message, fields) => logger.error({ part, ...fields }, message),
          metrics,
          policy: options.processorPolicy,
        }));
        running.set(part, processor);
        for (const [name, tracker] of processor.parts) liveness.add(name, tracker);
        // The sender's worker threads: the compose pool and the outbox transport's.
        if (part === 'sender') for (const [name, tracker] of services.threads()) liveness.add(name, tracker);
      }
    }
    liveness.watch();
  } catch (error) {
    liveness.stopWatching();
    stopStoreWatch?.();
    steps.current = 'api';
    await api?.close().catch(() => {});
    await metricsServer?.close().catch(() => {});
    for (const [part, started] of [...running.entries()].reverse()) {
      steps.current = part;
      await started.stop().catch(() => {});
    }
    steps.current = 'pipeline thread';
    await pipeline?.stop().catch(() => {});
    steps.current = 'stores';
    await services.close();
    await stores.close();
    throw error;
  }
  let stopping: Promise<void> | null = null;
  let waitingFor: string | null = null;
  let claimsStopped: Promise<void> | null = null;
  const stopClaiming = () => (claimsStopped ??= Promise.all([
    ...[...running].map(([part, stoppable]) => stoppable.stopClaiming?.().catch((error) => logger.error({ err: error, part }, 'stopping its claims failed'))),
    pipeline?.stopClaiming(),
  ]).then(() => {}));
  return {
    stores, services, api, url, metrics, metricsUrl: metricsServer?.url ?? null, logger, liveness, partsReady,
    stopClaiming,
    stop() {
      stopping ??= (async () => {
        liveness.stopWatching();
        stopStoreWatch?.();
        // No delivery starts once the stop has begun, however long the API's drain takes: one
        // started late could still be on the wire at the stop's deadline, and be cut.
        const claimsStopped = stopClaiming();
        // Requests and reports first (they append events), then the deliveries under way (their
        // outcomes too), then the other parts in reverse start order, so that every consumer still
        // reads what they appended and the forwarder forwards what the last of them appended.
        waitingFor = 'api';
        if (api) await api.close();
        waitingFor = 'metrics listener';
        await metricsServer?.close();
        // Named as the part the wait is for (the sender), as when it stops.
        waitingFor = [...running].filter(([, stoppable]) => stoppable.stopClaiming).map(([part]) => part).join(', ') || 'deliveries under way';
        await claimsStopped;
        waitingFor = 'consumers catching up';
        await processorsCaughtUp(liveness);
        const order = [...running.entries()].reverse();
        for (const [part, stoppable] of [...order.filter(([p]) => p === 'inbound'), ...order.filter(([p]) => p !== 'inbound')]) {
          waitingFor = part;
          await stoppable.stop().catch((error) => logger.error({ err: error, part }, 'stop failed'));
        }
        waitingFor = 'pipeline thread';
        await pipeline?.stop().catch((error) => logger.error({ err: error }, 'stopping the pipeline thread failed'));
        waitingFor = 'stores';
        await services.close();
        await stores.close();
        waitingFor = null;
        logger.info('stopped');
      })();
      return stopping;
    },
    stopWaitingFor: () => waitingFor,
  };
}

/** How long a stop lets this process's processors catch up with the log before they stop. */
const CATCH_UP_ON_STOP_MS = 2_000;
const CATCH_UP_LOOK_MS = 25;

/**
 * Waits, at most CATCH_UP_ON_STOP_MS, until no processor of this process has records waiting
 * (committed up to the end of what it owns). Once the parts that append in this process have
 * stopped (requests, deliveries), what they appended last is then handled and committed before
 * the consumers stop, rather than handed again to the next start; a processor fed by other
 * processes that go on appending costs its stop no more than the bound.
 */
async function processorsCaughtUp(liveness: PartsLiveness): Promise<void> {
  const names = new Set<string>(PROCESSORS.map((p) => p.name));
  const until = performance.now() + CATCH_UP_ON_STOP_MS;
  while (performance.now() < until) {
    const statuses = await liveness.statuses();
    if (!Object.entries(statuses).some(([part, status]) => names.has(part) && status.workWaiting)) return;
    await new Promise((resolve) => setTimeout(resolve, CATCH_UP_LOOK_MS));
  }
}

/**
 * Binds a listener. An address it cannot have is the operator's to fix, told in one line naming
 * the variable: a host name that does not resolve (a ConfigError, exit 78), a port that is taken
 * or not Relay's to use (a ListenError).
 */
async function bound<T>(what: string, host: string, port: number, variables: { host: string; port: string }, listen: () => Promise<T>): Promise<T> {
  try {
    return await listen();
  } catch (error) {
    for (let e = error as (NodeJS.ErrnoException & { cause?: unknown; hostname?: string }) | undefined, depth = 0; e && depth < 3; e = e.cause as typeof e, depth++) {
      if (e.syscall === 'listen' || e.code === 'EADDRINUSE') throw new ListenError(what, host, port, variables.port, e);
      const unresolved = e.syscall === 'getaddrinfo' || e.code === 'ENOTFOUND' || e.code === 'EAI_AGAIN';
      if (unresolved && (e.hostname === undefined || e.hostname === host)) {
        throw new ConfigError(variables.host, `cannot resolve "${host}" (${e.code ?? e.message}), the address ${what} listens on`);
      }
    }
    throw error;
  }
}
