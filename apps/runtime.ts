// Chooses the adapters behind each port from configuration. Nothing else in the code base
// knows which ones run: an unset URL means the embedded (node:sqlite) adapter, with its file
// under RELAY_DATA_DIR (embeddedFiles).
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError, StoreConnectError, type RelayConfig } from '../infra/config.ts';
import type { DocumentStore } from '../infra/ports/document-store.ts';
import type { EventStore } from '../infra/ports/event-store.ts';
import type { Log } from '../infra/ports/log.ts';
import type { KafkaLogLine } from '../infra/kafka/log.ts';
import { ConnectingLog, type ConnectingLogOptions } from '../infra/connecting-log.ts';
import { createDnsLookup } from '../infra/dns/resolver.ts';
import { webhookEgress } from '../infra/http/webhook-egress.ts';
import type { MailTransport } from '../infra/ports/mail-transport.ts';
import type { FieldFillReport } from '../infra/sqlite/field-fills.ts';
import type { CommitHold } from '../infra/sqlite/group-commit.ts';
import type { ReadFault } from '../infra/sqlite/read-fault.ts';
import { KeyFileMissingError, loadSecretKeys, SecretBox, sealedKeyIdOf, type SecretKeys } from '../infra/secrets/secret-box.ts';
import { DELIVERY_POLICY, scaleDeliveryPolicy } from '../domain/email/delivery.ts';
import { WEBHOOK_POLICY, scaleWebhookPolicy } from '../domain/webhooks/delivery.ts';
import { COLLECTIONS } from './services/collections.ts';
import { emailsOf } from './services/email-stream.ts';
import { eventsTopic } from './pipeline/topics.ts';
import { RateLimiter } from './services/rate-limits.ts';
import { sharedSendRate, unlimitedSendRate } from './services/send-rate.ts';
import type { Policies, Services } from './services/services.ts';
import { UsageLedger } from './services/usage-ledger.ts';
import { TlsSessionCounter } from './services/tls-reports/session-counts.ts';
import { mtaStsPolicyStore } from './services/mta-sts-policies.ts';
import { SiteRegistry } from './services/delivery/sites.ts';
import { DEFAULT_SITE_LIMITS, limitsFor } from '../domain/delivery/sites.ts';
import { ComposePool } from '../infra/mail/compose-pool.ts';
import type { ThreadStartReport } from '../infra/threads/thread-starts.ts';
import { reportHashingThreadStarts } from '../infra/secrets/scrypt-thread.ts';
import { TemplateThreads } from '../infra/rendering/template-threads.ts';
export { wakeOtherThreads } from '../infra/sqlite/change-signal.ts';
import { reportDkimKeyThreadStarts } from '../infra/dns/dkim-keys.ts';
import { DnsCache } from '../infra/dns/dns-cache.ts';
import { StubResolver } from '../infra/dns/stub-resolver.ts';
import { MtaStsResolver } from '../infra/mail/mta-sts.ts';
import { MxTransport } from '../infra/mail/mx-transport.ts';
import { OutboxTransport } from '../infra/mail/outbox-transport.ts';
import type { SessionLog } from '../infra/mail/pooled-sessions.ts';
import { SmtpTransport } from '../infra/mail/smtp-transport.ts';

export interface Stores {
  events: EventStore;
  documents: DocumentStore;
  log: Log;
  /** Which adapter serves each port, for logs and /readyz. */
  kinds: { events: string; documents: string; log: string };
  close(): Promise<void>;
}

/** Whether any port runs its embedded adapter, whose file lives in RELAY_DATA_DIR. */
export function usesDataDir(config: RelayConfig): boolean {
  return !config.eventStoreUrl || !config.kafkaBrokers || !config.mongodbUrl;
}

/**
 * Where the embedded adapters keep their data. The event store, the document store and the log
 * share relay.db: an admission writes to the first two, and on one file their writes of a turn
 * share one commit and one WAL sync (two syncs at once took 0.7–0.9 ms, one 0.3 ms); in the
 * event store's file the log serves the events topic from the event store's rows, so each
 * event is written once and no forwarder copies it (infra/sqlite/event-partitions.ts). Each
 * write is still all or nothing on its own (infra/sqlite/group-commit.ts) and no code relies on
 * two writes landing together, as none can on EventStoreDB, Kafka and MongoDB. A data directory
 * made before keeps its events.db and documents.db, and its log.db, whose events topic the
 * forwarder goes on copying into (its groups' offsets are offsets of that copy).
 */
export function embeddedFiles(dataDir: string): { events: string; documents: string; log: string } {
  const split = existsSync(join(dataDir, 'events.db')) || existsSync(join(dataDir, 'documents.db'));
  const events = join(dataDir, split ? 'events.db' : 'relay.db');
  return {
    events,
    documents: join(dataDir, split ? 'documents.db' : 'relay.db'),
    log: existsSync(join(dataDir, 'log.db')) ? join(dataDir, 'log.db') : events,
  };
}

/** Errors that mean Relay's user may not write there: the operator's to fix, not a bug. */
const NOT_WRITABLE = new Set(['EACCES', 'EPERM', 'EROFS']);

/** What a test may give the embedded stores (never set in production). */
export interface StoreOptions {
  /** Holds each sqlite commit and sync until it resolves (infra/sqlite/group-commit.ts). */
  commitHold?: CommitHold;
  /** Makes the embedded stores' reads fail on demand (infra/sqlite/read-fault.ts). */
  readFault?: ReadFault;
}

export interface OpenStoresOptions extends StoreOptions {
  /**
   * For a process none of whose parts publishes to or consumes from the log (the API alone):
   * a distributed log is connected behind the start, tried again until it answers (see
   * infra/connecting-log.ts), so the process starts and serves while the brokers are down.
   * Without it, a log that cannot be reached fails the start.
   */
  logInBackground?: Pick<ConnectingLogOptions, 'onRetry' | 'onConnected'>;
  /**
   * Gives the opening up (a stop came while a store did not answer yet): openStores rejects with
   * the signal's reason at once, having closed the stores already open, and a store that opens
   * later is closed as it does.
   */
  abandon?: AbortSignal;
  /**
   * Leaves the log unopened, for what neither publishes to it nor reads it (the operator's
   * commands on documents and events): they work, and at once, while the brokers are down.
   */
  withoutLog?: true;
  /** Where a distributed log's client writes its lines: the process's structured logger. Default: text on stderr. */
  logClientLines?: (line: KafkaLogLine) => void;
  /** How the embedded document store's fills of field columns go (the first start after an upgrade may fill large tables). */
  onFieldFill?: (report: FieldFillReport) => void;
}

/** The stores without the log (openStores with `withoutLog`). */
export type StoresWithoutLog = Omit<Stores, 'log'>;

export function openStores(config: RelayConfig, options: OpenStoresOptions & { withoutLog: true }): Promise<StoresWithoutLog>;
export function openStores(config: RelayConfig, options?: OpenStoresOptions & { withoutLog?: undefined }): Promise<Stores>;
export async function openStores(config: RelayConfig, options: OpenStoresOptions = {}): Promise<Stores | StoresWithoutLog> {
  // Private to Relay's user: the stores hold personal data and the secret key file lives here.
  // An existing directory keeps its mode (README, Operations: chmod 700 it). With the URLs of
  // the stores it opens set nothing is created: a container's file system may be read-only to
  // Relay's user.
  if (options.withoutLog ? !config.eventStoreUrl || !config.mongodbUrl : usesDataDir(config)) {
    try {
      mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? '';
      // mkdir -p stops at a file: EEXIST when the path is one, ENOTDIR when a part of it is.
      if (code === 'EEXIST' || code === 'ENOTDIR') {
        throw new ConfigError('RELAY_DATA_DIR', `${config.dataDir} is not a directory (${code === 'EEXIST' ? 'a file is there' : 'a part of the path is a file'}, ${code}); name a directory, or a path where one can be made`);
      }
      if (!NOT_WRITABLE.has(code)) throw error;
      throw new ConfigError('RELAY_DATA_DIR', `cannot create ${config.dataDir} (${code}); the embedded stores need a directory Relay's user can write (or set RELAY_EVENTSTORE_URL, RELAY_KAFKA_BROKERS and RELAY_MONGODB_URL)`);
    }
  }
  const opened: Array<{ close(): Promise<void> }> = [];
  try {
    const events = await unlessAbandoned(openEventStore(config, options), options.abandon);
    opened.push(events.store);
    const documents = await unlessAbandoned(openDocumentStore(config, options), options.abandon);
    opened.push(documents.store);
    const close = async () => {
      for (const store of opened.reverse()) await store.close().catch(() => {});
    };
    if (options.withoutLog) {
      return { events: events.store, documents: documents.store, kinds: { events: events.kind, documents: documents.kind, log: 'none' }, close };
    }
    const log = await unlessAbandoned(openLog(config, options), options.abandon);
    opened.push(log.store);
    return {
      events: events.store,
      documents: documents.store,
      log: log.store,
      kinds: { events: events.kind, documents: documents.kind, log: log.kind },
      close,
    };
  } catch (error) {
    for (const store of opened.reverse()) await store.close().catch(() => {});
    throw error;
  }
}

/** A store as it opens, unless `abandon` aborts first: then the signal's reason, and the store closed once it opens. */
function unlessAbandoned<T extends { store: { close(): Promise<void> } }>(opening: Promise<T>, abandon: AbortSignal | undefined): Promise<T> {
  if (!abandon) return opening;
  return new Promise<T>((resolve, reject) => {
    const giveUp = () => {
      reject(abandon.reason);
      opening.then(({ store }) => store.close(), () => {}).catch(() => {});
    };
    if (abandon.aborted) return giveUp();
    abandon.addEventListener('abort', giveUp, { once: true });
    opening.then(resolve, reject).finally(() => abandon.removeEventListener('abort', giveUp));
  });
}

/** The times of delivery and webhooks: the domain's, scaled by RELAY_DELIVERY_RETRY_SCALE and RELAY_WEBHOOK_RETRY_SCALE (tests). */
export const policiesOf = (config: Pick<RelayConfig, 'deliveryRetryScale' | 'webhookRetryScale'>): Policies => ({
  delivery: scaleDeliveryPolicy(DELIVERY_POLICY, config.deliveryRetryScale),
  webhooks: scaleWebhookPolicy(WEBHOOK_POLICY, config.webhookRetryScale),
});

/**
 * The services of one process. Per process: the rate limiter keeps slot hints and the ledger
 * folded usage; both are only caches in front of the shared stores.
 */
/**
 * `log`: where the mail transports tell of connections they gave up on (the process's logger).
 * `threadStarts`: the report of each worker-thread pool (by name) whose threads fail to start.
 */
export async function openServices(
  config: RelayConfig, stores: Pick<Stores, 'events' | 'documents'>, log?: SessionLog, threadStarts?: (pool: string) => ThreadStartReport,
): Promise<Services> {
  const { secrets, fileKeyKept } = await openSecretBox(config, stores.documents);
  const rateLimits = new RateLimiter(stores.documents);
  const outboxDir = outboxDirOf(config);
  let transport: MailTransport | null = null;
  let mx: MxDelivery | null = null;
  let sites: SiteRegistry | null = null;
  const openMx = () => (mx ??= openMxDelivery(config, stores.documents, log));
  const composer = new ComposePool({ threads: config.composeThreads, ...(threadStarts ? { onThreadStart: threadStarts('compose') } : {}) });
  const usage = new UsageLedger(stores.events);
  const policies = policiesOf(config);
  const templates = new TemplateThreads({ timeLimitMs: config.templateTimeLimitMs, ...(threadStarts ? { onThreadStart: threadStarts } : {}) });
  if (threadStarts) reportHashingThreadStarts(threadStarts('password_hashing'));
  if (threadStarts) reportDkimKeyThreadStarts(threadStarts('dkim_key_generation'));
  return {
    policies,
    emails: emailsOf(stores.events, policies),
    rateLimits,
    usage,
    dns: createDnsLookup(config.dnsServers),
    egress: webhookEgress,
    secrets,
    fileKeyKept: fileKeyKept && { ...fileKeyKept, currentKeyId: secrets.keyId },
    transport: () => (transport ??= config.delivery === 'mx' ? openMx().transport : openTransport(config, outboxDir, log)),
    mxDelivery: () => (config.delivery === 'mx' ? openMx() : null),
    // Sites are Relay's own MTA's: through a smarthost (or into the outbox) the provider shapes.
    sites: () => (sites ??= config.delivery === 'mx'
      ? new SiteRegistry({ dns: openMx().dns, rules: config.shaping, scale: config.deliveryRetryScale })
      : new SiteRegistry({ dns: null, rules: [], shaping: false })),
    sendRate: config.sendRate === null ? unlimitedSendRate : sharedSendRate(stores.documents, config.sendRate),
    compose: composer.compose,
    warmCompose: () => composer.warm(),
    templates,
    outboxDir,
    threads: () => new Map([
      ...(composer.threads > 0 ? [['compose', composer.liveness] as const] : []),
      ...(transport?.liveness ? [['outbox', transport.liveness] as const] : []),
    ]),
    close: async () => {
      await rateLimits.close();
      usage.close();
      await transport?.close();
      await mx?.tlsSessions.close();
      await composer.close();
      await templates.close();
    },
  };
}

/** Where the outbox transport writes its messages (RELAY_DELIVERY=outbox). */
export const outboxDirOf = (config: Pick<RelayConfig, 'dataDir'>): string => join(config.dataDir, 'outbox');

async function openSecretBox(config: RelayConfig, documents: DocumentStore): Promise<{ secrets: SecretBox; fileKeyKept: SecretKeys['fileKeyKept'] }> {
  try {
    const keys = await loadSecretKeys({
      secretKey: config.secretKey ?? undefined, previousKeys: config.previousSecretKeys, dataDir: config.dataDir,
      sealedValuesStored: () => sealedValuesStored(documents),
    });
    return { secrets: new SecretBox(keys), fileKeyKept: keys.fileKeyKept };
  } catch (error) {
    if (error instanceof KeyFileMissingError) throw new ConfigError('RELAY_SECRET_KEY', `is not set and ${error.message}`);
    const code = (error as NodeJS.ErrnoException).code ?? '';
    // No key given and nowhere to keep a generated one (a read-only container, say).
    if (config.secretKey === null && (NOT_WRITABLE.has(code) || code === 'ENOTDIR' || code === 'EEXIST')) {
      throw new ConfigError('RELAY_SECRET_KEY', `is not set, and the key file cannot be kept in ${config.dataDir} (${code}); set RELAY_SECRET_KEY (32 random bytes as base64: openssl rand -base64 32) or make RELAY_DATA_DIR writable`);
    }
    const message = (error as Error).message;
    if (/RELAY_SECRET_KEY/.test(message)) throw new ConfigError(/PREVIOUS/.test(message) ? 'RELAY_SECRET_KEY_PREVIOUS' : 'RELAY_SECRET_KEY', message.replace(/^RELAY_SECRET_KEY(_PREVIOUS)?:?\s*/, ''));
    throw error;
  }
}

/**
 * What the stores hold that a secret key sealed (domains' DKIM keys, webhook endpoints'
 * signing secrets), with the key that sealed one, or null when nothing: a key file made now
 * would open none of it.
 */
async function sealedValuesStored(documents: DocumentStore): Promise<string | null> {
  const held: string[] = [];
  for (const [collection, what, field] of [
    [COLLECTIONS.domains, 'the DKIM keys of domains', 'dkimPrivateKeySealed'],
    [COLLECTIONS.webhookEndpoints, 'the signing secrets of webhook endpoints', 'secretSealed'],
    [COLLECTIONS.contentKeys, 'the content keys of emails (their bodies)', 'key'],
  ] as const) {
    const documentsOf = documents.collection<{ _id: string; [field: string]: unknown }>(collection);
    const count = await documentsOf.count();
    if (count === 0) continue;
    const [first] = await documentsOf.find({ limit: 1 });
    const sealed = first?.[field];
    const keyId = sealedKeyIdOf(sealed);
    held.push(`${what}: ${count}${keyId ? `, one sealed under key ${keyId}` : ''}`);
  }
  return held.length === 0 ? null : held.join('; ');
}

/** The transport RELAY_DELIVERY names: outbox files, a smarthost, or Relay as the MTA. */
function openTransport(config: RelayConfig, outboxDir: string, log: SessionLog | undefined): MailTransport {
  switch (config.delivery) {
    case 'outbox':
      return new OutboxTransport(outboxDir);
    case 'smtp':
      return new SmtpTransport({ url: config.smtpUrl!, heloName: config.mailHost, log });
    case 'mx':
      throw new Error('the mx transport is opened by openMxDelivery');
  }
}

interface MxDelivery {
  transport: MxTransport;
  dns: DnsCache;
  tlsSessions: TlsSessionCounter;
}

/** Relay as the MTA: one DNS cache for every lookup of mail delivery (MX, addresses, MTA-STS and TLS-RPT records), and the TLS session counts. */
function openMxDelivery(config: RelayConfig, documents: DocumentStore, log: SessionLog | undefined): MxDelivery {
  // With a validating resolver the operator trusts, everything goes through it and DANE applies.
  const dnssec = config.dnssecResolvers !== null;
  const dns = new DnsCache(new StubResolver({ servers: config.dnssecResolvers ?? config.dnsServers, dnssec }));
  const mtaSts = config.mtaSts
    ? new MtaStsResolver({ dns, store: mtaStsPolicyStore(documents), port: config.mtaStsPort ?? undefined, allowAddresses: config.mxAllow })
    : undefined;
  const tlsSessions = new TlsSessionCounter(documents);
  const transport = new MxTransport({
    dnsServers: config.dnsServers, dns, heloName: config.mailHost, port: config.mxPort ?? undefined, allowAddresses: config.mxAllow, mtaSts, tlsReports: tlsSessions, log,
    // A site's connections are its MX hosts'; the dispatcher bounds transactions per site.
    maxConnectionsPerHost: Math.max(...[DEFAULT_SITE_LIMITS, ...config.shaping.map((r) => r.limits)].map((l) => l.connections ?? DEFAULT_SITE_LIMITS.connections)),
    messagesPerConnection: (host) => limitsFor([host], config.shaping).messagesPerConnection,
  });
  return { transport, dns, tlsSessions };
}

const errorMessage = (error: unknown): string => (error instanceof Error ? error.message : String(error));

async function openEventStore(config: RelayConfig, options: StoreOptions): Promise<{ store: EventStore; kind: string }> {
  if (config.eventStoreUrl) {
    const { EsdbEventStore } = await import('../infra/esdb/event-store.ts');
    return { store: EsdbEventStore.connect(config.eventStoreUrl), kind: 'eventstoredb' };
  }
  const { SqliteEventStore } = await import('../infra/sqlite/event-store.ts');
  return { store: new SqliteEventStore(embeddedFiles(config.dataDir).events, options), kind: 'sqlite' };
}

async function openDocumentStore(config: RelayConfig, options: StoreOptions & Pick<OpenStoresOptions, 'abandon' | 'onFieldFill'>): Promise<{ store: DocumentStore; kind: string }> {
  if (config.mongodbUrl) {
    const url = config.mongodbUrl;
    const { MongoDocumentStore, MongoUrlError, withoutUserinfo } = await import('../infra/mongodb/document-store.ts');
    try {
      return { store: await MongoDocumentStore.connect(url), kind: 'mongodb' };
    } catch (error) {
      if (error instanceof MongoUrlError) throw error;
      // The host list: what follows the scheme and any user information, up to the path.
      const hosts = /^[^:/?#]+:\/\/(?:[^/?#]*@)?([^/?#]*)/.exec(url)?.[1] ?? '?';
      throw new StoreConnectError('document store', 'RELAY_MONGODB_URL', hosts, withoutUserinfo(errorMessage(error), url), error);
    }
  }
  const { SqliteDocumentStore } = await import('../infra/sqlite/document-store.ts');
  return { store: new SqliteDocumentStore(embeddedFiles(config.dataDir).documents, options), kind: 'sqlite' };
}

async function openLog(config: RelayConfig, options: OpenStoresOptions): Promise<{ store: Log; kind: string }> {
  if (config.kafkaBrokers) {
    const { KafkaLog } = await import('../infra/kafka/log.ts');
    const brokers = config.kafkaBrokers;
    // The instance name ends the client id, by which a restarted instance recognises its crashed
    // predecessor still in a group (infra/kafka/log.ts, waitForEarlierSelf).
    const connect = () => KafkaLog.connect(brokers, { logLine: options.logClientLines, instanceId: config.instanceId, sessionTimeoutMs: config.kafkaSessionTimeoutMs });
    if (options.logInBackground) return { store: new ConnectingLog(connect, options.logInBackground), kind: 'kafka' };
    try {
      return { store: await connect(), kind: 'kafka' };
    } catch (error) {
      throw new StoreConnectError('log', 'RELAY_KAFKA_BROKERS', brokers.join(','), errorMessage(error), error);
    }
  }
  const { SqliteLog } = await import('../infra/sqlite/log.ts');
  const files = embeddedFiles(config.dataDir);
  // In the embedded event store's own file, the events topic is a view of its rows.
  const eventsTopicHere = !config.eventStoreUrl && files.log === files.events ? eventsTopic(config.logNamespace) : undefined;
  return { store: new SqliteLog(files.log, { ...options, eventsTopic: eventsTopicHere }), kind: 'sqlite' };
}
