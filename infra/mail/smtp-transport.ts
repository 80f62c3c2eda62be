// The `smtp` transport: relays every message through one smarthost (RELAY_SMTP_URL) over a
// pool of nodemailer SMTP connections. The smarthost takes the message (`accepted`); bounces
// and delivery reports come back later by DSN, which every send asks for.
//
// The pool is this module's own rather than nodemailer's: a message waits for a connection
// that is set up (TLS, authentication) before its caller's beginTransaction runs, so the
// sender's durable mark that a transaction began (domain/email/delivery.ts) comes right before
// MAIL FROM, and a crash while a message waits for a connection leaves nothing unknown.
//
// RELAY_SMTP_URL forms:
//   smtp://user:pass@host:587            STARTTLS required: a server that does not offer it fails
//                                        the send (`deferred`, stage tls), never plain text
//   smtps://user:pass@host:465           TLS from the first byte
//   smtp://127.0.0.1:1025?tls=none       plain text; only to a loopback host (127.0.0.0/8, ::1,
//                                        localhost), e.g. a local Postfix or a test server
// User and password are percent-decoded. Default ports: 587 (smtp), 465 (smtps).
import { InFlight } from './in-flight.ts';
import net from 'node:net';
import { domainToASCII } from 'node:url';
import SMTPConnection from 'nodemailer/lib/smtp-connection/index.js';
import { notBegunOutcome, type MailTransport, type OutgoingMessage, type RecipientOutcome, type SendOptions, type TransportOutcome } from '../ports/mail-transport.ts';
import { asNodemailerError, envelopeOutcomes, errorOutcome, isConnectionLevel, MAX_REPLY_BYTES, parseQueueId, peerTextForLog, replyOutcome } from './smtp-replies.ts';
import type { NodemailerError } from './smtp-replies.ts';
import { afterPendingReplies, MIN_BODY_BYTES_PER_SECOND, quit, reset, setupDeadline, transact, type SessionLog } from './pooled-sessions.ts';
import { PERCENT_ENCODE_USERINFO, quotableUrlToken, userinfoCutShort } from '../url-refusals.ts';

export type SmtpTlsMode = 'starttls' | 'implicit' | 'none';

export interface SmtpUrlSettings {
  host: string;
  port: number;
  tls: SmtpTlsMode;
  user: string | null;
  pass: string | null;
}

const URL_FORMS = 'smtp://user:pass@host:587 (STARTTLS), smtps://user:pass@host:465 (TLS) or smtp://127.0.0.1:1025?tls=none (plain text, loopback only)';

/** 127.0.0.0/8, ::1 (also IPv4-mapped) and localhost: traffic that never leaves the machine. */
export function isLoopbackHost(host: string): boolean {
  const name = host.toLowerCase().replace(/^\[|\]$/g, '').replace(/\.$/, '');
  if (name === 'localhost' || name.endsWith('.localhost')) return true;
  if (net.isIPv4(name)) return name.startsWith('127.');
  if (!net.isIPv6(name)) return false;
  if (name === '::1') return true;
  const mapped = /^::ffff:(.+)$/.exec(name)?.[1];
  if (!mapped) return false;
  if (net.isIPv4(mapped)) return mapped.startsWith('127.');
  // URL parsing rewrites ::ffff:127.0.0.1 as ::ffff:7f00:1.
  return /^7f[0-9a-f]{2}:[0-9a-f]{1,4}$/.test(mapped);
}

/** Reads RELAY_SMTP_URL. Throws with a message naming RELAY_SMTP_URL and the rule it breaks; never echoes the user information, nor any part of the URL that could be some of it. */
export function parseSmtpUrl(value: string): SmtpUrlSettings {
  const refuse = (rule: string) => new Error(`RELAY_SMTP_URL ${rule}; expected ${URL_FORMS}`);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw refuse('is not a URL');
  }
  const scheme = url.protocol.replace(/:$/, '').toLowerCase();
  if (scheme !== 'smtp' && scheme !== 'smtps') throw refuse(`has scheme "${scheme}", not smtp or smtps`);
  const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  if (!host) throw refuse('names no host');
  // An "@" after the host: user information cut short by an unescaped "?", "#" or "/", which the
  // parser then reads as host and port, the rest as query, fragment or path. Nothing after the
  // host is quoted then: it is the rest of the user name or password.
  if (userinfoCutShort(url)) throw refuse(`has an "@" after its host; ${PERCENT_ENCODE_USERINFO}`);
  if (url.pathname !== '' && url.pathname !== '/') throw refuse('must not have a path');
  if (url.hash !== '') throw refuse('must not have a fragment ("#…")');
  for (const key of url.searchParams.keys()) {
    if (key !== 'tls') throw refuse(`${quotableUrlToken(key) ? `has unknown parameter "${key}"` : 'has an unknown parameter'} (only tls=none is known)`);
  }
  const tlsParam = url.searchParams.get('tls');
  let tls: SmtpTlsMode = scheme === 'smtps' ? 'implicit' : 'starttls';
  if (tlsParam !== null) {
    if (tlsParam !== 'none') throw refuse(`${quotableUrlToken(tlsParam) ? `has tls=${tlsParam}` : 'has an unknown tls value'}; the only value is tls=none`);
    if (scheme === 'smtps') throw refuse('combines smtps:// with tls=none');
    if (!isLoopbackHost(host)) {
      throw refuse(`asks for plain text (tls=none) to ${host}: plain text is only allowed to a loopback host (127.0.0.0/8, ::1, localhost), so credentials and messages never cross a network unencrypted`);
    }
    tls = 'none';
  }
  const port = url.port ? Number(url.port) : scheme === 'smtps' ? 465 : 587;
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw refuse('has an invalid port');
  let user: string | null = null;
  let pass: string | null = null;
  try {
    if (url.username) user = decodeURIComponent(url.username);
    if (url.password) pass = decodeURIComponent(url.password);
  } catch {
    throw refuse('has a user or password that is not valid percent-encoding');
  }
  if (pass !== null && user === null) throw refuse('has a password without a user');
  return { host, port, tls, user, pass };
}

export interface SmtpTransportOptions {
  /** RELAY_SMTP_URL, see parseSmtpUrl. */
  url: string;
  /** Extra CA certificates to trust for the smarthost (a private CA; tests). */
  ca?: string | Buffer | Array<string | Buffer>;
  /** Pooled connections to the smarthost. Default 5. */
  maxConnections?: number;
  /** EHLO name. Default nodemailer's: the machine's host name when it is a FQDN, else [127.0.0.1]. */
  heloName?: string;
  /** TCP connect (and TLS handshake) limit; with commandTimeoutMs, the session's setup (to EHLO and AUTH done) as a whole. Default 30 s. */
  connectTimeoutMs?: number;
  /** Longest wait for any reply, the final one after DATA included. Default 2 min. */
  commandTimeoutMs?: number;
  /** The slowest the smarthost may read a message body: n bytes have max(commandTimeoutMs, n at this rate). Default MIN_BODY_BYTES_PER_SECOND (pooled-sessions.ts). */
  minBodyBytesPerSecond?: number;
  /** Where connections given up on (a failed RSET) are told. Default: nowhere. */
  log?: SessionLog;
  /** An unused pooled connection is closed after this long. Default 30 s. */
  idleTimeoutMs?: number;
}

/** A connection idle longer than this answers RSET before it carries a message (the server may have dropped it). */
const CHECK_AFTER_IDLE_MS = 1000;
interface PooledConnection {
  conn: SMTPConnection;
  /** releasing: back from a transaction, kept once its pending replies are taken up (afterPendingReplies). */
  state: 'busy' | 'releasing' | 'idle' | 'gone';
  idleSince: number;
  /** Its last transaction failed: RSET before the next, however soon. */
  mustReset: boolean;
  idleTimer: NodeJS.Timeout | undefined;
  ended: Promise<void>;
}

/** Matching key for an address as we passed it and as nodemailer reports it back (it punycodes domains). */
function addressKey(address: string): string {
  const at = address.lastIndexOf('@');
  if (at < 0) return address.toLowerCase();
  const domain = address.slice(at + 1);
  return `${address.slice(0, at)}@${(domainToASCII(domain) || domain).toLowerCase()}`.toLowerCase();
}

export class SmtpTransport implements MailTransport {
  readonly name = 'smtp';
  readonly capacity: number;
  readonly #settings: SmtpUrlSettings;
  readonly #options: Required<Omit<SmtpTransportOptions, 'url' | 'ca' | 'heloName' | 'log'>> & Pick<SmtpTransportOptions, 'ca' | 'heloName' | 'log'>;
  readonly #inFlight = new InFlight('smtp');
  readonly #idle: PooledConnection[] = [];
  readonly #waiters: Array<() => void> = [];
  #open = 0;
  /** Connections back from a transaction, not idle yet (#release): an acquire waits for them. */
  #releasing = 0;
  #closed = false;

  constructor(options: SmtpTransportOptions) {
    this.#settings = parseSmtpUrl(options.url);
    this.#options = {
      ca: options.ca,
      heloName: options.heloName,
      maxConnections: options.maxConnections ?? 5,
      connectTimeoutMs: options.connectTimeoutMs ?? 30_000,
      commandTimeoutMs: options.commandTimeoutMs ?? 120_000,
      idleTimeoutMs: options.idleTimeoutMs ?? 30_000,
      minBodyBytesPerSecond: options.minBodyBytesPerSecond ?? MIN_BODY_BYTES_PER_SECOND,
      log: options.log,
    };
    this.capacity = this.#options.maxConnections;
  }

  send(message: OutgoingMessage, options: SendOptions = {}): Promise<TransportOutcome> {
    return this.#inFlight.run(() => this.#send(message, options));
  }

  async #send(message: OutgoingMessage, options: SendOptions): Promise<TransportOutcome> {
    const recipients = [...new Set(message.envelope.recipients)];
    let pooled: PooledConnection;
    try {
      pooled = await this.#acquire();
    } catch (caught) {
      const error = asNodemailerError(caught);
      return { providerMessageId: null, recipients: recipients.map((address) => errorOutcome(address, error, false)) };
    }
    let begun: boolean;
    try {
      begun = options.beginTransaction ? await options.beginTransaction() : true;
    } catch (error) {
      this.#release(pooled, true);
      throw error;
    }
    if (!begun) {
      this.#release(pooled, true);
      return { providerMessageId: null, recipients: recipients.map(notBegunOutcome) };
    }
    return this.#transaction(pooled, message, recipients);
  }

  async #transaction(pooled: PooledConnection, message: OutgoingMessage, recipients: string[]): Promise<TransportOutcome> {
    const envelope = {
      from: message.envelope.mailFrom,
      to: recipients,
      dsn: { notify: ['SUCCESS', 'FAILURE', 'DELAY'], ret: 'HDRS', envid: message.emailId },
    };
    const limits = { replyMs: this.#options.commandTimeoutMs, minBodyBytesPerSecond: this.#options.minBodyBytesPerSecond };
    const { error, info, bodySent } = await transact(pooled.conn, envelope as SMTPConnection.Envelope, message.raw, limits);
    // A refused transaction may leave the session mid-envelope (MAIL FROM accepted, every RCPT
    // refused): the connection is reset before it carries the next one.
    this.#release(pooled, !pooled.conn.destroyed && (!error || !isConnectionLevel(error)), error !== null);

    const byKey = new Map(recipients.map((r) => [addressKey(r), r]));
    const original = (address: string) => byKey.get(addressKey(address)) ?? address;
    const fromWire = (errors: NodemailerError[] | undefined) => (errors ?? []).map((e) => ({ ...e, message: e.message, recipient: e.recipient && original(e.recipient) }));
    if (!error && info) {
      const response = String(info.response ?? '');
      const outcomes = envelopeOutcomes(recipients, (info.accepted ?? []).map((a) => original(String(a))), fromWire(info.rejectedErrors as NodemailerError[] | undefined), (address) => replyOutcome(address, 'accepted', response));
      const anyAccepted = outcomes.some((o) => o.result === 'accepted');
      return { providerMessageId: anyAccepted ? (parseQueueId(response) ?? message.messageId) : null, recipients: outcomes };
    }
    const failure: NodemailerError = error ?? new Error('no result from the connection');
    let outcomes: RecipientOutcome[];
    if (failure.code === 'EENVELOPE' && failure.command === 'RCPT TO' && failure.rejectedErrors?.length) {
      outcomes = envelopeOutcomes(recipients, [], fromWire(failure.rejectedErrors), (address) => errorOutcome(address, failure, false));
    } else {
      // A failure at or after DATA does not tell which recipients RCPT TO refused before, so
      // the message's fate is every recipient's.
      outcomes = recipients.map((address) => errorOutcome(address, failure, bodySent));
    }
    return { providerMessageId: null, recipients: outcomes };
  }

  /** A connection set up and ready for MAIL FROM: an idle one (checked with RSET after a pause), or a new one. */
  async #acquire(): Promise<PooledConnection> {
    for (;;) {
      if (this.#closed) throw new Error('smtp transport is closed');
      const idle = this.#idle.pop();
      if (idle) {
        clearTimeout(idle.idleTimer);
        idle.state = 'busy';
        const fresh = !idle.mustReset && Date.now() - idle.idleSince < CHECK_AFTER_IDLE_MS;
        const failure = fresh ? null : await reset(idle, this.#options.commandTimeoutMs);
        if (failure === null) return idle;
        // The failure may quote the server's reply: a field, never the message.
        this.#options.log?.warn({ host: this.#settings.host, reason: peerTextForLog(failure) }, `smtp: a pooled connection to ${this.#settings.host} failed RSET and was closed`);
        this.#discard(idle);
        continue;
      }
      // One on its way back from a transaction is waited for rather than another opened.
      if (this.#releasing === 0 && this.#open < this.#options.maxConnections) {
        this.#open++;
        try {
          return await this.#connect();
        } catch (error) {
          this.#open--;
          this.#waiters.shift()?.();
          throw error;
        }
      }
      await new Promise<void>((resolve) => this.#waiters.push(resolve));
    }
  }

  #release(pooled: PooledConnection, reusable: boolean, mustReset = false): void {
    if (pooled.state !== 'busy') return;
    if (!reusable) {
      this.#discard(pooled);
      return;
    }
    pooled.state = 'releasing';
    this.#releasing++;
    afterPendingReplies(() => {
      this.#releasing--;
      if (pooled.state !== 'releasing') return;
      if (this.#closed || pooled.conn.destroyed) {
        this.#discard(pooled);
        return;
      }
      pooled.state = 'idle';
      pooled.idleSince = Date.now();
      pooled.mustReset = mustReset;
      this.#idle.push(pooled);
      pooled.idleTimer = setTimeout(() => this.#discard(pooled), this.#options.idleTimeoutMs);
      this.#waiters.shift()?.();
    });
  }

  #discard(pooled: PooledConnection): void {
    if (pooled.state === 'gone') return;
    const at = this.#idle.indexOf(pooled);
    if (at >= 0) this.#idle.splice(at, 1);
    pooled.state = 'gone';
    clearTimeout(pooled.idleTimer);
    this.#open--;
    quit(pooled);
    this.#waiters.shift()?.();
  }

  /** Connects, greets, secures (as the URL says) and authenticates, or rejects with nodemailer's error. */
  #connect(): Promise<PooledConnection> {
    const { host, port, tls, user, pass } = this.#settings;
    const conn = new SMTPConnection({
      host,
      port,
      secure: tls === 'implicit',
      requireTLS: tls === 'starttls',
      ignoreTLS: tls === 'none',
      tls: this.#options.ca ? { ca: this.#options.ca } : {},
      name: this.#options.heloName,
      connectionTimeout: this.#options.connectTimeoutMs,
      greetingTimeout: this.#options.commandTimeoutMs,
      socketTimeout: this.#options.commandTimeoutMs,
      maxResponseSize: MAX_REPLY_BYTES,
      logger: false,
    });
    let ended!: () => void;
    const pooled: PooledConnection = { conn, state: 'busy', idleSince: 0, mustReset: false, idleTimer: undefined, ended: new Promise((resolve) => (ended = resolve)) };
    return new Promise((resolve, reject) => {
      let settled = false;
      const settle = (error: Error | null) => {
        if (settled) return;
        settled = true;
        clearDeadline();
        if (!error) return resolve(pooled);
        conn.close();
        reject(error);
      };
      const clearDeadline = setupDeadline(conn, this.#options.connectTimeoutMs + this.#options.commandTimeoutMs, settle);
      // SMTPConnection emits 'error' for the whole of its life; without a listener it would throw.
      conn.on('error', (error) => settle(error));
      conn.once('end', () => {
        ended();
        // The server may close an idle connection; a busy one is settled by its transaction.
        if (pooled.state === 'idle') this.#discard(pooled);
        settle(new Error('connection closed during setup'));
      });
      conn.connect((error) => {
        if (error) return settle(error);
        // As nodemailer's own pool: credentials go only to a server that offers AUTH.
        if (user === null || !conn.allowsAuth) return settle(null);
        conn.login({ user, pass: pass ?? '' }, (loginError) => settle(loginError ?? null));
      });
    });
  }

  async close(): Promise<void> {
    if (!(await this.#inFlight.close())) return;
    this.#closed = true;
    const idle = [...this.#idle];
    for (const pooled of idle) this.#discard(pooled);
    for (const wake of this.#waiters.splice(0)) wake();
    await Promise.all(idle.map((pooled) => pooled.ended));
  }
}
