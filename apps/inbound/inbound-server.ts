// `relay inbound`: the SMTP server behind every verified domain's MAIL FROM MX
// (bounce.<domain> → RELAY_MAIL_HOST). It accepts mail only for valid return paths of Relay's
// own emails (refused at RCPT otherwise: it never relays anything anywhere), reads each report
// up to a size limit, and records what it says about the recipient its return path names.
//
// Nothing a client sends can freeze or flood the process (limits: infra/mail/inbound-limits.ts,
// docs/inbound.md): connections are capped in all and per client network, a transaction takes
// at most 50 RCPTs and each one's lookup is answered on a turn of the event loop of its own
// (apps/services/feedback/report-targets.ts reads only what it needs), sessions and DATA
// transfers have deadlines, DATA is read at a bounded rate (read-rate.ts), a report is cut to
// what the parser reads while it arrives (infra/mail/report-trim.ts) under a budget shared by
// every open transfer, and parsed on threads of its own (infra/mail/report-parse-pool.ts)
// within a time budget.
//
// Liveness (infra/liveness.ts): each report recorded is progress; a store that fails a lookup
// or a recording (the sender is told 451, and retries) makes it `recovering` until one
// succeeds, or until the stores answer their ping again: reports are seldom, so while
// recovering the server pings them itself on a capped, doubling back-off (STORE_PROBE), and
// stops once they answer, a lookup or recording succeeds, or the server stops. Work waits while
// reports are being recorded; a listener that closes by itself stops it.
//
// A refusal for want of room (every connection taken, the client's share taken, the parsers
// busy, no room for the report's bytes) loses nothing at once, but a flood that lasts makes
// senders give up on their reports: each one is told (onRefused: relay_inbound_refused_total),
// and at most once a minute per reason with how many (onRefusing: a warn line). A return path
// refused at RCPT loses its report for good, and a wave of them is how a secret key dropped too
// early shows (docs/operations.md, "The secret key"): each is counted by reason too, told with
// the email it names (onReturnPathRefused: a debug line), and, but for addresses that are not
// return paths at all (mail to made-up addresses, which every bounce domain gets), at most once
// a minute per reason (onReturnPathsRefusing: a warn line).
import { randomUUID } from 'node:crypto';
import { setImmediate } from 'node:timers/promises';
import type { Socket } from 'node:net';
import { SMTPServer, type SMTPServerDataStream, type SMTPServerOptions, type SMTPServerSession } from 'smtp-server';
import type { SMTPConnection } from 'smtp-server/lib/smtp-connection.js';
import { clientNetworkOf } from '../../infra/http/address-ranges.ts';
import { INBOUND_LIMITS, type InboundLimits } from '../../infra/mail/inbound-limits.ts';
import { parseVerpAddress } from '../../domain/delivery/verp.ts';
import { ReportOverBudgetError, ReportParsePool, ReportParserBusyError, ReportParserUnavailableError } from '../../infra/mail/report-parse-pool.ts';
import type { ThreadStartReport } from '../../infra/threads/thread-starts.ts';
import { MAX_REPORT_BYTES } from '../../infra/mail/report-parser.ts';
import { MAX_KEPT_BYTES, trimReport } from '../../infra/mail/report-trim.ts';
import type { DocumentStore } from '../../infra/ports/document-store.ts';
import type { EventStore } from '../../infra/ports/event-store.ts';
import type { SecretBox } from '../../infra/secrets/secret-box.ts';
import { Liveness } from '../../infra/liveness.ts';
import { Backoff, type RetryPolicy } from '../../infra/retry.ts';
import { answerWithin, PING_TIMEOUT_MS } from '../liveness.ts';
import type { InboundRefusalReason, InboundRoomRefusalReason, ReturnPathRefusalReason } from '../relay-metrics.ts';
import type { Emails } from '../services/email-stream.ts';
import { ingestReport, type IngestResult } from '../services/feedback/ingest-report.ts';
import { ReportTargets, withBccAddresses, type ReportTarget } from '../services/feedback/report-targets.ts';
import { SerialByKey } from '../services/serial-by-key.ts';
import { readInboundTls } from './inbound-tls.ts';
import { ReadRate } from './read-rate.ts';

/**
 * RCPT commands per transaction, refused ones and repeats of one address included (smtp-server
 * would take a repeated address without counting it): each costs a lookup.
 */
const MAX_RECIPIENTS_PER_MESSAGE = 50;
/** What a report without a SIZE is taken to need at MAIL FROM (most bounces are a few KiB). */
const TYPICAL_REPORT_BYTES = 64 * 1024;
/** While a store failure keeps the server `recovering`: when it pings the stores (1 s, doubling up to 1 min). */
export const STORE_PROBE: RetryPolicy = { initialDelayMs: 1_000, maxDelayMs: 60_000 };
/** Refusals of one reason are told (onRefusing) at most this often: the first at once, the others summed. */
export const REFUSALS_TOLD_EVERY_MS = 60_000;

export interface InboundOptions {
  host: string;
  port: number;
  /** The name in the greeting: RELAY_MAIL_HOST. */
  hostname: string;
  /** PEM files; with both, STARTTLS is offered. */
  tlsCertFile: string | null;
  tlsKeyFile: string | null;
  /** RELAY_INBOUND_MAX_CONNECTIONS_PER_CLIENT; the other limits are INBOUND_LIMITS. */
  maxConnectionsPerClient?: number;
  events: EventStore;
  /** The email streams (services.emails): reports are recorded through them. */
  emails: Emails;
  documents: DocumentStore;
  secrets: SecretBox;
  now: () => Date;
  /** Its liveness tracker (a new one when not given). */
  liveness?: Liveness;
  /** The server's own failures: a store that fails, a report that cannot be recorded, the listener. */
  onError: (error: Error) => void;
  /**
   * Each session that ends with an error of its connection (a client resetting it, a STARTTLS
   * handshake that fails): the client's doing or the network's, which anyone who reaches the
   * port can cause at will, so never onError; the caller logs it at debug.
   */
  onSessionError?: (error: Error & { code?: string }) => void;
  onReport?: (result: IngestResult) => void;
  /** Each session or report refused, by reason: for want of room (the client is told 4xx), or its return path at RCPT (550). */
  onRefused?: (reason: InboundRefusalReason) => void;
  /**
   * The first refusal for want of room of a reason, then every REFUSALS_TOLD_EVERY_MS while they
   * go on: how many there were since it was last told (the caller logs it at warn).
   */
  onRefusing?: (reason: InboundRoomRefusalReason, count: number) => void;
  /** Each return path refused at RCPT, with the email and recipient it names when it is in Relay's form (the caller logs it at debug). */
  onReturnPathRefused?: (reason: ReturnPathRefusalReason, named: NamedRecipient | null) => void;
  /**
   * As onRefusing, for return paths refused at RCPT other than not_a_return_path, with the email
   * the last of them named (the caller logs it at warn).
   */
  onReturnPathsRefusing?: (reason: ReturnPathRefusalReason, count: number, named: NamedRecipient | null) => void;
  /** Tests: how often refusals of one reason are told (default REFUSALS_TOLD_EVERY_MS). */
  refusalsToldEveryMs?: number;
  /** The back-off of the stores' pings while recovering from a store failure (default STORE_PROBE). */
  storeProbe?: RetryPolicy;
  /** Tests: limits made small enough to reach, and a parser thread that can be made to hang. */
  limits?: Partial<InboundLimits>;
  parserWorkerUrl?: URL;
  /** Told when the report parser's threads fail to start, and when one starts again. */
  onThreadStart?: ThreadStartReport;
}

/** The email and recipient a return path names, read without its MAC: what a refused one claims to be. */
export interface NamedRecipient {
  emailId: string;
  recipientIndex: number;
}

export interface InboundServer {
  port: number;
  liveness: Liveness;
  /** Sessions the server keeps state for: none once every connection has closed. */
  sessionsHeld(): number;
  /** Whether it is looking for its stores' recovery (a ping scheduled or under way): never once running again or stopped. */
  probingStores(): boolean;
  /** Open connections (smtp-server's, refused ones still closing left out). */
  connections(): number;
  stop(): Promise<void>;
}

/**
 * Open connections per client network (infra/http/address-ranges.ts clientNetworkOf): an IPv6
 * client's /64, whose addresses any host on it may take at will; an IPv4 client's address.
 */
export class ClientSlots {
  readonly #max: number;
  readonly #open = new Map<string, number>();

  constructor(max: number) {
    this.#max = max;
  }

  /** The client's network, now holding one more slot; null when it holds `max` already. */
  take(address: string): string | null {
    const network = clientNetworkOf(address);
    const open = this.#open.get(network) ?? 0;
    if (open >= this.#max) return null;
    this.#open.set(network, open + 1);
    return network;
  }

  give(network: string): void {
    const open = (this.#open.get(network) ?? 1) - 1;
    if (open > 0) this.#open.set(network, open);
    else this.#open.delete(network);
  }
}

/** Resolves on the next turn of the event loop, after the I/O and timers that are due. */
const nextTurn = (): Promise<void> => setImmediate();

/** An SMTP error reply; `text` starts with its enhanced status code (RFC 3463). */
const smtpError = (code: number, text: string) => Object.assign(new Error(text), { responseCode: code });
const ENHANCED_CODE = /^[245]\.\d{1,3}\.\d{1,3} /;

/**
 * smtp-server with a hook on each connection it opens (deadlines and replies are set per
 * connection), and on each it refuses itself: past maxClients it answers 421 "Too many connected
 * clients" and closes the connection within connect(), before any handler of ours runs, so a
 * connection it no longer holds once connect() returns is one it refused.
 */
class FeedbackSmtpServer extends SMTPServer {
  readonly #opened: (connection: SMTPConnection) => void;
  readonly #full: () => void;

  constructor(options: SMTPServerOptions, opened: (connection: SMTPConnection) => void, full: () => void) {
    super(options);
    this.#opened = opened;
    this.#full = full;
  }

  override connect(socket: Socket, socketOptions?: Parameters<SMTPServer['connect']>[1]): void {
    super.connect(socket, socketOptions);
    for (const connection of this.connections) {
      if (connection._socket === socket) return this.#opened(connection);
    }
    this.#full();
  }
}

/** Refusals by reason, told at most once per reason and interval: the first at once, the ones after it summed at the interval's end. */
class RefusalTally<Reason extends string> {
  readonly #tell: (reason: Reason, count: number) => void;
  readonly #everyMs: number;
  /** Reasons told within the interval, with the refusals since. */
  readonly #window = new Map<Reason, { count: number; timer: NodeJS.Timeout }>();

  constructor(everyMs: number, tell: (reason: Reason, count: number) => void) {
    this.#everyMs = everyMs;
    this.#tell = tell;
  }

  add(reason: Reason): void {
    const open = this.#window.get(reason);
    if (open) open.count++;
    else this.#told(reason, 1);
  }

  /** Tells what is still untold. */
  stop(): void {
    for (const [reason, { count, timer }] of this.#window) {
      clearTimeout(timer);
      if (count > 0) this.#tell(reason, count);
    }
    this.#window.clear();
  }

  #told(reason: Reason, count: number): void {
    this.#tell(reason, count);
    const timer = setTimeout(() => {
      const { count: since } = this.#window.get(reason)!;
      this.#window.delete(reason);
      if (since > 0) this.#told(reason, since);
    }, this.#everyMs);
    timer.unref();
    this.#window.set(reason, { count: 0, timer });
  }
}

export async function startInbound(options: InboundOptions): Promise<InboundServer> {
  const limits: InboundLimits = {
    ...INBOUND_LIMITS,
    ...(options.maxConnectionsPerClient === undefined ? {} : { maxConnectionsPerClient: options.maxConnectionsPerClient }),
    ...options.limits,
  };
  /** Each session's transaction under way: its targets, and the RCPT commands it was given. */
  const transactions = new Map<string, { targets: ReportTarget[]; rcpts: number }>();
  const liveness = options.liveness ?? new Liveness();
  let recording = 0;
  liveness.probeWaiting(async () => recording > 0);
  let stopping = false;
  /** Open connections by session id, each with its session deadline (cleared in onClose: after STARTTLS the first socket never says it closed). */
  const connections = new Map<string, { connection: SMTPConnection; deadline: NodeJS.Timeout }>();
  const slots = new ClientSlots(limits.maxConnectionsPerClient);
  const counted = new Map<string, string>();
  const budget = { held: 0 };
  const parser = new ReportParsePool({
    threads: limits.parseThreads, budgetMs: limits.parseBudgetMs, maxWaiting: limits.parseWaiting, workerUrl: options.parserWorkerUrl,
    onThreadStart: options.onThreadStart,
  });
  const lanes = new SerialByKey();
  const tally = new RefusalTally<InboundRoomRefusalReason>(options.refusalsToldEveryMs ?? REFUSALS_TOLD_EVERY_MS, (reason, count) => options.onRefusing?.(reason, count));
  const refused = (reason: InboundRoomRefusalReason) => {
    options.onRefused?.(reason);
    tally.add(reason);
  };
  /** The recipient each reason's last refused return path named, for its next warn line. */
  const lastNamed = new Map<ReturnPathRefusalReason, NamedRecipient | null>();
  const returnPathTally = new RefusalTally<ReturnPathRefusalReason>(options.refusalsToldEveryMs ?? REFUSALS_TOLD_EVERY_MS,
    (reason, count) => options.onReturnPathsRefusing?.(reason, count, lastNamed.get(reason) ?? null));
  const returnPathRefused = (lookup: ReturnPathRefusalReason, address: string) => {
    const named = namedRecipientOf(address);
    // The lookup does not tell a MAC that fails from an address in another form.
    const reason = lookup === 'not_a_return_path' && named !== null ? 'unknown_return_path' : lookup;
    options.onRefused?.(reason);
    options.onReturnPathRefused?.(reason, named);
    if (reason === 'not_a_return_path') return;
    lastNamed.set(reason, named);
    returnPathTally.add(reason);
  };

  // The stores' failures and successes, and the probe that looks for their recovery while no
  // report comes to do it: one timer or one ping at a time, none once running again or stopping.
  const probeBackoff = new Backoff(options.storeProbe ?? STORE_PROBE);
  let storeFailures = 0;
  let storeDown = false;
  let probeTimer: NodeJS.Timeout | null = null;
  let probing: Promise<void> | null = null;
  const storesAnswer = async () => (await Promise.all([
    answerWithin(options.events.ping(), PING_TIMEOUT_MS, () => false),
    answerWithin(options.documents.ping(), PING_TIMEOUT_MS, () => false),
  ])).every(Boolean);
  const storeSucceeded = (progress: boolean) => {
    if (progress) liveness.progress('store');
    else liveness.succeeded('store');
    storeDown = false;
    probeBackoff.reset();
    stopProbe();
  };
  const stopProbe = () => {
    if (probeTimer) clearTimeout(probeTimer);
    probeTimer = null;
  };
  const scheduleProbe = () => {
    if (stopping || !storeDown || probeTimer || probing || liveness.state === 'stopped') return;
    probeTimer = setTimeout(() => {
      probeTimer = null;
      const failuresBefore = storeFailures;
      probing = storesAnswer().catch(() => false).then((answered) => {
        probing = null;
        // A failure told while the ping ran is newer than its answer: look again later.
        if (answered && storeDown && !stopping && storeFailures === failuresBefore) storeSucceeded(false);
        else scheduleProbe();
      });
    }, probeBackoff.next());
  };
  const storeFailed = (error: unknown) => {
    storeFailures++;
    storeDown = true;
    liveness.failed(error, 'store');
    scheduleProbe();
  };
  const readRate = new ReadRate(limits.dataBytesPerSecond, Math.min(limits.dataBytesPerSecond, MAX_REPORT_BYTES));
  const deps = { events: options.events, emails: options.emails, documents: options.documents, secrets: options.secrets, now: options.now, lanes };
  const reportTargets = new ReportTargets(deps);
  const tls = options.tlsCertFile && options.tlsKeyFile ? readInboundTls(options.tlsCertFile, options.tlsKeyFile) : null;

  /** Closes a session with a 421 (the client retries later, elsewhere or here). */
  const cut = (connection: SMTPConnection, text: string) => connection.send(421, `${text}, closing connection`);

  const opened = (connection: SMTPConnection) => {
    // Replies this server words itself carry their own enhanced code; smtp-server would
    // otherwise put its own guess by the reply code in front of it.
    const send = connection.send.bind(connection);
    connection.send = (code, data, context) => send(code, data, typeof data === 'string' && ENHANCED_CODE.test(data) ? false : context);
    connections.set(connection.id, { connection, deadline: setTimeout(() => cut(connection, `4.4.2 ${options.hostname} Error: session lasted ${seconds(limits.sessionMs)}`), limits.sessionMs) });
  };

  const server = new FeedbackSmtpServer({
    name: options.hostname,
    banner: 'Relay feedback (bounces and complaints only)',
    size: MAX_REPORT_BYTES,
    rejectOversized: true,
    hideENHANCEDSTATUSCODES: false,
    authOptional: true,
    disabledCommands: tls ? ['AUTH'] : ['AUTH', 'STARTTLS'],
    ...(tls ?? {}),
    hideSTARTTLS: !tls,
    disableReverseLookup: true,
    logger: false,
    maxClients: limits.maxConnections,
    socketTimeout: limits.idleMs,
    closeTimeout: 1_000,
    onConnect(session, callback) {
      const network = slots.take(session.remoteAddress);
      if (network === null) {
        refused('too_many_from_client');
        return callback(smtpError(421, `4.7.0 ${options.hostname} Error: too many connections from ${clientNetworkOf(session.remoteAddress)}, try again later`));
      }
      counted.set(session.id, network);
      callback();
    },
    onMailFrom(address, session, callback) {
      // Reports come from anyone (usually with the null sender); what matters is the RCPT. A
      // client that announced its size learns now when the reports in flight leave no room.
      const announced = Number(address.args && (address.args as Record<string, string>).SIZE) || 0;
      if (limits.dataBytesInFlight - budget.held < Math.min(announced || TYPICAL_REPORT_BYTES, MAX_KEPT_BYTES)) {
        refused('no_room');
        return callback(smtpError(452, '4.3.1 Insufficient system storage for a report now, try again later'));
      }
      transactions.set(session.id, { targets: [], rcpts: 0 });
      callback();
    },
    onRcptTo(address, session, callback) {
      const transaction = transactions.get(session.id) ?? { targets: [], rcpts: 0 };
      // Answered at once: smtp-server yields to the event loop every 100 commands answered so.
      if (++transaction.rcpts > MAX_RECIPIENTS_PER_MESSAGE) return callback(smtpError(452, '4.5.3 Too many recipients'));
      // A lookup resolves within microtasks when the store answers synchronously (node:sqlite):
      // its answer waits for the next turn, so a pipeline of RCPTs cannot run as one block.
      reportTargets.find(address.address).finally(nextTurn).then((found) => {
        if (found.read) storeSucceeded(false);
        if (!found.ok) {
          returnPathRefused(found.reason, address.address);
          return callback(smtpError(550, `5.1.1 <${address.address.slice(0, 100)}>: no such mailbox here (this server takes only Relay's return paths)`));
        }
        // A return path given twice is one recipient (smtp-server keeps one too): one ingest each.
        const { emailId, recipientIndex } = found.target;
        if (!transaction.targets.some((t) => t.emailId === emailId && t.recipientIndex === recipientIndex)) transaction.targets.push(found.target);
        // A client gone during the lookup has had its session's entries removed (onClose).
        if (connections.has(session.id)) transactions.set(session.id, transaction);
        callback();
      }, (error: Error) => {
        storeFailed(error);
        options.onError(error);
        callback(smtpError(451, '4.3.0 Temporary failure, try again later'));
      });
    },
    onData(stream: SMTPServerDataStream, session: SMTPServerSession, callback) {
      const recipients = transactions.get(session.id)?.targets ?? [];
      transactions.delete(session.id);
      const connection = connections.get(session.id)?.connection;
      const deadline = setTimeout(() => connection && cut(connection, `4.4.2 ${options.hostname} Error: DATA not completed within ${seconds(limits.dataMs)}`), limits.dataMs);
      let held = 0;
      const keep = (bytes: number) => {
        if (budget.held + bytes > limits.dataBytesInFlight) return false;
        budget.held += bytes;
        held += bytes;
        return true;
      };
      const receive = async (): Promise<string> => {
        const report = await trimReport(stream, { maxBytes: MAX_REPORT_BYTES, keep, pace: (bytes) => readRate.delay(bytes) });
        clearTimeout(deadline);
        // Over the size limit: smtp-server answers 552 5.3.4 itself (rejectOversized).
        if (stream.sizeExceeded) return 'Report too large';
        if (!report.bytes) {
          refused('no_room');
          throw smtpError(452, '4.3.1 Insufficient system storage for this report now, try again later');
        }
        const parsed = await parser.parse(report.bytes);
        const origin = { correlationId: `inbound-${randomUUID()}`, causationId: `smtp-${session.id}` };
        recording++;
        const result = await withBccAddresses(deps, recipients).then((targets) => ingestReport(deps, targets, { parsed, sha256: report.sha256 }, origin)).then((recorded) => {
          storeSucceeded(true);
          return recorded;
        }, (error: unknown) => {
          storeFailed(error);
          throw error;
        }).finally(() => recording--);
        options.onReport?.(result);
        return 'Report received';
      };
      receive().then((message) => callback(null, message), (error: Error & { responseCode?: number }) => {
        if (error.responseCode) return callback(error);
        if (error instanceof ReportOverBudgetError) return callback(smtpError(554, `5.3.4 Report too complex to read within ${seconds(limits.parseBudgetMs)}`));
        if (error instanceof ReportParserBusyError) {
          refused('parser_busy');
          return callback(smtpError(451, '4.3.2 Too many reports being read now, try again later'));
        }
        // Said once per streak by the pool's start report, not once per report.
        if (error instanceof ReportParserUnavailableError) return callback(smtpError(451, '4.3.0 Temporary failure, try again later'));
        // The client went away mid-transfer: nobody to answer.
        if (stream.destroyed && !stream.readableEnded) return callback(error);
        options.onError(error);
        callback(smtpError(451, '4.3.0 Temporary failure, try again later'));
      }).finally(() => {
        clearTimeout(deadline);
        budget.held -= held;
      });
    },
    onClose(session) {
      transactions.delete(session.id);
      clearTimeout(connections.get(session.id)?.deadline);
      connections.delete(session.id);
      const network = counted.get(session.id);
      if (network === undefined) return;
      counted.delete(session.id);
      slots.give(network);
    },
  }, opened, () => refused('too_many_connections'));
  // smtp-server emits its listener's errors and every connection's (socket, TLS) alike, as its
  // own 'error': a listener put first on its net.Server marks the listener's, the rest are sessions'.
  // A failure to bind is the start's to report (it rejects below), not an error to retry.
  let listening = false;
  const listenerErrors = new WeakSet<Error>();
  const sessionErrors = new WeakSet<Error>();
  server.server.prependListener('error', (error) => listenerErrors.add(error));
  server.on('error', (error) => {
    if (listenerErrors.has(error)) {
      if (listening) options.onError(error);
    } else if (!sessionErrors.has(error)) {
      // A failed STARTTLS handshake comes twice, as one error ('_tlsError', then 'error').
      sessionErrors.add(error);
      options.onSessionError?.(error);
    }
  });
  await new Promise<void>((resolve, reject) => {
    const refuse = (error: NodeJS.ErrnoException) => reject(new Error(
      `the feedback SMTP server cannot listen on ${options.host}:${options.port}: ${error.code ?? error.message}; choose another RELAY_INBOUND_SMTP_PORT or RELAY_INBOUND_SMTP_HOST`,
      { cause: error },
    ));
    server.server.once('error', refuse);
    server.listen(options.port, options.host, () => {
      server.server.off('error', refuse);
      listening = true;
      resolve();
    });
  }).catch(async (error: unknown) => {
    await parser.close();
    throw error;
  });
  const port = (server.server.address() as { port: number }).port;
  server.server.once('close', () => {
    if (stopping) return;
    liveness.stopped(new Error(`the feedback SMTP server stopped listening on ${options.host}:${port}`));
    stopProbe();
  });
  return {
    port,
    liveness,
    sessionsHeld: () => new Set([...transactions.keys(), ...connections.keys(), ...counted.keys()]).size,
    probingStores: () => probeTimer !== null || probing !== null,
    connections: () => server.connections.size,
    stop: async () => {
      stopping = true;
      stopProbe();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      tally.stop();
      returnPathTally.stop();
      // A ping under way ends before the stores may be closed.
      await probing;
      await parser.close();
      liveness.stopped();
    },
  };
}

/** What a return path in Relay's form names, its MAC unchecked; null for any other address. */
function namedRecipientOf(address: string): NamedRecipient | null {
  const parsed = parseVerpAddress(address, () => true);
  return 'error' in parsed ? null : parsed;
}

const seconds = (ms: number) => (ms % 60_000 === 0 ? `${ms / 60_000} min` : `${ms / 1000} s`);
