// The `smtp` transport: relays every message through one smarthost (RELAY_SMTP_URL) over
// nodemailer's connection pool. The smarthost takes the message (`accepted`); bounces and
// delivery reports come back later by DSN, which every send asks for.
//
// RELAY_SMTP_URL forms:
//   smtp://user:pass@host:587            STARTTLS required: a server that does not offer it fails
//                                        the send (`deferred`, stage tls), never plain text
//   smtps://user:pass@host:465           TLS from the first byte
//   smtp://127.0.0.1:2525?tls=none       plain text; only to a loopback host (127.0.0.0/8, ::1,
//                                        localhost), e.g. a local Postfix or a test server
// User and password are percent-decoded. Default ports: 587 (smtp), 465 (smtps).
import { InFlight } from './in-flight.ts';
import net from 'node:net';
import { domainToASCII } from 'node:url';
import nodemailer from 'nodemailer';
import type { Readable } from 'node:stream';
import type { MailTransport, OutgoingMessage, RecipientOutcome, TransportOutcome } from '../ports/mail-transport.ts';
import { asNodemailerError, envelopeOutcomes, errorOutcome, parseQueueId, replyOutcome } from './smtp-replies.ts';
import type { NodemailerError } from './smtp-replies.ts';

export type SmtpTlsMode = 'starttls' | 'implicit' | 'none';

export interface SmtpUrlSettings {
  host: string;
  port: number;
  tls: SmtpTlsMode;
  user: string | null;
  pass: string | null;
}

const URL_FORMS = 'smtp://user:pass@host:587 (STARTTLS), smtps://user:pass@host:465 (TLS) or smtp://127.0.0.1:2525?tls=none (plain text, loopback only)';

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

/** Reads RELAY_SMTP_URL. Throws with a message naming RELAY_SMTP_URL and the rule it breaks; never echoes the password. */
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
  if (url.pathname !== '' && url.pathname !== '/') throw refuse('must not have a path');
  for (const key of url.searchParams.keys()) {
    if (key !== 'tls') throw refuse(`has unknown parameter "${key}" (only tls=none is known)`);
  }
  const tlsParam = url.searchParams.get('tls');
  let tls: SmtpTlsMode = scheme === 'smtps' ? 'implicit' : 'starttls';
  if (tlsParam !== null) {
    if (tlsParam !== 'none') throw refuse(`has tls=${tlsParam}; the only value is tls=none`);
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
  /** TCP connect (and TLS handshake) limit. Default 30 s. */
  connectTimeoutMs?: number;
  /** Longest wait for any reply, the final one after DATA included. Default 2 min. */
  commandTimeoutMs?: number;
  /** An unused pooled connection is closed after this long. Default 30 s. */
  idleTimeoutMs?: number;
}

interface SendTracker {
  bodySent: boolean;
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
  readonly #mailer: ReturnType<typeof nodemailer.createTransport>;
  readonly #inFlight = new InFlight('smtp');

  constructor(options: SmtpTransportOptions) {
    const { host, port, tls, user, pass } = parseSmtpUrl(options.url);
    const commandTimeout = options.commandTimeoutMs ?? 120_000;
    this.#mailer = nodemailer.createTransport({
      pool: true,
      host,
      port,
      secure: tls === 'implicit',
      requireTLS: tls === 'starttls',
      ignoreTLS: tls === 'none',
      tls: options.ca ? { ca: options.ca } : {},
      auth: user !== null ? { user, pass: pass ?? '' } : undefined,
      name: options.heloName,
      maxConnections: options.maxConnections ?? 5,
      maxMessages: Infinity,
      // The pool would otherwise resend a message whose connection closed under it; the sender
      // processor owns retries, so a failure comes back as `deferred` at once.
      maxRequeues: 0,
      idleTimeout: options.idleTimeoutMs ?? 30_000,
      connectionTimeout: options.connectTimeoutMs ?? 30_000,
      greetingTimeout: commandTimeout,
      socketTimeout: commandTimeout,
      disableFileAccess: true,
      disableUrlAccess: true,
      logger: false,
    });
    // The pool hands the message stream to the connection only after DATA was accepted and the
    // stream ends once the connection has taken every byte; the end-of-data dot follows at
    // once. That is the line between `deferred` and `unknown` for a lost connection.
    this.#mailer.use('stream', (mail, done) => {
      const tracker = (mail.data as { relayTracker?: SendTracker }).relayTracker;
      if (tracker) {
        mail.message.processFunc((input: Readable) => {
          input.once('end', () => (tracker.bodySent = true));
          return input;
        });
      }
      done();
    });
  }

  send(message: OutgoingMessage): Promise<TransportOutcome> {
    return this.#inFlight.run(() => this.#send(message));
  }

  async #send(message: OutgoingMessage): Promise<TransportOutcome> {
    const recipients = [...new Set(message.envelope.recipients)];
    const tracker: SendTracker = { bodySent: false };
    try {
      const mail = {
        envelope: { from: message.envelope.mailFrom, to: recipients },
        raw: message.raw,
        dsn: { notify: ['SUCCESS', 'FAILURE', 'DELAY'], ret: 'HDRS', envid: message.emailId },
        relayTracker: tracker,
      };
      const info = await this.#mailer.sendMail(mail);
      const response = String(info.response ?? '');
      const byKey = new Map(recipients.map((r) => [addressKey(r), r]));
      const original = (address: string) => byKey.get(addressKey(address)) ?? address;
      const rejectedErrors = ((info.rejectedErrors ?? []) as NodemailerError[]).map((e) => ({ ...e, message: e.message, recipient: e.recipient && original(e.recipient) }));
      const outcomes = envelopeOutcomes(recipients, (info.accepted ?? []).map((a: string) => original(a)), rejectedErrors, (address) => replyOutcome(address, 'accepted', response));
      const anyAccepted = outcomes.some((o) => o.result === 'accepted');
      return { providerMessageId: anyAccepted ? (parseQueueId(response) ?? message.messageId) : null, recipients: outcomes };
    } catch (caught) {
      const error = asNodemailerError(caught);
      let outcomes: RecipientOutcome[];
      if (error.code === 'EENVELOPE' && error.command === 'RCPT TO' && error.rejectedErrors?.length) {
        outcomes = envelopeOutcomes(recipients, [], error.rejectedErrors, (address) => errorOutcome(address, error, false));
      } else {
        // A failure at or after DATA does not tell which recipients RCPT TO refused before, so
        // the message's fate is every recipient's.
        outcomes = recipients.map((address) => errorOutcome(address, error, tracker.bodySent));
      }
      return { providerMessageId: null, recipients: outcomes };
    }
  }

  async close(): Promise<void> {
    if (!(await this.#inFlight.close())) return;
    this.#mailer.close();
  }
}
