// The `mx` transport: Relay as the MTA. Per recipient domain of a call it looks up the MX
// hosts (RFC 5321 5.1: implicit MX when there are none, RFC 7505 null MX), connects to them in
// preference order and runs one transaction (MAIL FROM, RCPT TO per recipient, DATA).
//
// TLS is opportunistic: STARTTLS whenever offered. Certificates are not verified by default
// (no MTA-STS/DANE here), because refusing an unverifiable certificate would only push the
// message onto plain text. A failed handshake falls back to plain text on a new connection,
// noted in each recipient's response.
//
// Connections are pooled per MX host (a receiver like Gmail serves many domains): an idle
// connection stays open for idleTimeoutMs and is checked with RSET before its next transaction.
//
// Only public addresses are connected to (the webhook egress rule, infra/http/address-ranges.ts):
// whoever controls a recipient domain's DNS controls where its MX points, and an MX on loopback
// or a private network would reach a relay that trusts this host. The connection goes to the
// address that was checked, never to a name looked up again.
import { classifyAddress } from '../http/address-ranges.ts';
import { InFlight } from './in-flight.ts';
import { Resolver } from 'node:dns/promises';
import net from 'node:net';
import { PassThrough } from 'node:stream';
import { domainToASCII } from 'node:url';
import SMTPConnection from 'nodemailer/lib/smtp-connection/index.js';
import { notBegunOutcome, type MailTransport, type OutgoingMessage, type RecipientOutcome, type RecipientResult, type SendOptions, type TransportOutcome } from '../ports/mail-transport.ts';
import { asNodemailerError, envelopeOutcomes, errorOutcome, isConnectionLevel, isTlsFailure, replyOutcome } from './smtp-replies.ts';
import type { NodemailerError } from './smtp-replies.ts';

export interface MxTransportOptions {
  /** Resolvers, `IP` or `IP:port` (`[v6]:port`). Empty: the system's (/etc/resolv.conf). */
  dnsServers: string[];
  /** EHLO name; should be the sending IP's PTR name. */
  heloName: string;
  /** RELAY_MX_PORT: the port every MX connection goes to. Default 25; tests point it elsewhere. */
  port?: number;
  tls?: {
    ca?: string | Buffer | Array<string | Buffer>;
    /** Default false: see the file comment. */
    rejectUnauthorized?: boolean;
  };
  /** Setting a session up: TCP connect, greeting, EHLO and STARTTLS. Default 60 s. */
  connectTimeoutMs?: number;
  /** Longest wait for any later reply, the one after DATA included. Default 5 min (RFC 5321 4.5.3.2). */
  commandTimeoutMs?: number;
  /** Per DNS query attempt. Default 5 s. */
  dnsTimeoutMs?: number;
  /** How long an unused connection stays open for the next transaction. Default 5 s. */
  idleTimeoutMs?: number;
  /** Open connections per MX host. Default 3. */
  maxConnectionsPerHost?: number;
  /**
   * RELAY_MX_ALLOW (tests only): addresses outside the public ranges that MX connections may go
   * to anyway, such as a test's SMTP server on 127.0.0.1. Exact addresses, as DNS answers them.
   */
  allowAddresses?: ReadonlySet<string>;
}

/** Connection attempts per domain and call, over all its MX hosts and their addresses. */
const MAX_ATTEMPTS_PER_DOMAIN = 5;
/** How long a QUIT may wait for its reply before the socket is closed anyway. */
const QUIT_GRACE_MS = 1000;

/** What an MX host's addresses allow: some to connect to, or why there are none. */
type HostAddresses =
  | { kind: 'usable'; addresses: string[] }
  /** DNS says the host has no address (NXDOMAIN, no A/AAAA): final, like a missing host. */
  | { kind: 'none'; response: string }
  /** Every address is outside the public ranges: final too, whatever a retry would look up. */
  | { kind: 'refused'; response: string }
  /** The lookup failed (timeout, SERVFAIL): a retry may do better. */
  | { kind: 'unknown'; response: string };

type Route =
  | { kind: 'hosts'; hosts: string[]; implicit: boolean }
  | { kind: 'final'; result: RecipientResult; enhancedCode: string; response: string };

interface Lease {
  conn: SMTPConnection;
  host: string;
  /** Why this connection is in plain text although TLS was tried, for the responses. */
  note: string | null;
  state: 'busy' | 'idle' | 'gone';
  idleTimer: NodeJS.Timeout | undefined;
  ended: Promise<void>;
}

interface HostSlot {
  idle: Lease[];
  open: number;
  waiters: Array<() => void>;
}

function shuffled<T>(items: T[]): T[] {
  const copy = [...items];
  for (let i = copy.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [copy[i], copy[j]] = [copy[j], copy[i]];
  }
  return copy;
}

function dnsCode(error: unknown): string {
  return (error as NodeJS.ErrnoException).code ?? 'UNKNOWN';
}

function final(address: string, result: RecipientResult, enhancedCode: string, response: string): RecipientOutcome {
  return { address, result, smtpCode: null, enhancedCode, response, stage: 'dns' };
}

/** The domain of an address for DNS (IDNA), or null when it has none we can route. */
function routingDomain(address: string): string | null {
  const at = address.lastIndexOf('@');
  if (at <= 0 || at === address.length - 1) return null;
  const domain = address.slice(at + 1).replace(/\.$/, '');
  if (domain.startsWith('[')) return null; // address literals: not routed by DNS
  return domainToASCII(domain).toLowerCase() || null;
}

/** The address as it goes into RCPT TO: the domain in its ASCII form. */
function wireAddress(address: string, asciiDomain: string): string {
  return `${address.slice(0, address.lastIndexOf('@'))}@${asciiDomain}`;
}

class ConnectionPool {
  readonly #slots = new Map<string, HostSlot>();
  readonly #connect: (host: string, address: string, useTls: boolean) => Promise<Lease>;
  readonly #max: number;
  readonly #idleMs: number;
  #closed = false;

  constructor(connect: (host: string, address: string, useTls: boolean) => Promise<Lease>, max: number, idleMs: number) {
    this.#connect = connect;
    this.#max = max;
    this.#idleMs = idleMs;
  }

  #slot(host: string): HostSlot {
    let slot = this.#slots.get(host);
    if (!slot) this.#slots.set(host, (slot = { idle: [], open: 0, waiters: [] }));
    return slot;
  }

  /** A live connection to `host`: an idle one that answers RSET, or a new one to one of `addresses`. */
  async acquire(host: string, addresses: string[], budget: { attempts: number }): Promise<Lease> {
    const slot = this.#slot(host);
    for (;;) {
      if (this.#closed) throw new Error('mx transport is closed');
      const idle = slot.idle.pop();
      if (idle) {
        clearTimeout(idle.idleTimer);
        idle.state = 'busy';
        if (await reset(idle)) return idle;
        this.discard(idle);
        continue;
      }
      if (slot.open < this.#max) {
        slot.open++;
        try {
          return await this.#open(host, addresses, budget);
        } catch (error) {
          slot.open--;
          slot.waiters.shift()?.();
          throw error;
        }
      }
      await new Promise<void>((resolve) => slot.waiters.push(resolve));
    }
  }

  async #open(host: string, addresses: string[], budget: { attempts: number }): Promise<Lease> {
    let lastError: Error = new Error(`no address to connect to for ${host}`);
    for (const address of addresses) {
      if (budget.attempts <= 0) break;
      budget.attempts--;
      let lease: Lease;
      try {
        lease = await this.#connect(host, address, true);
      } catch (caught) {
        const error = asNodemailerError(caught);
        const tlsFailed = (error as { duringTls?: boolean }).duringTls === true || isTlsFailure(error);
        if (!tlsFailed) {
          lastError = new Error(`${host} [${address}]: ${error.message}`);
          continue;
        }
        try {
          lease = await this.#connect(host, address, false);
          lease.note = `sent without TLS: STARTTLS failed (${error.message})`;
        } catch (plainCaught) {
          lastError = new Error(`${host} [${address}]: ${asNodemailerError(plainCaught).message}`);
          continue;
        }
      }
      lease.ended.then(() => {
        // The server may close an idle connection; a busy one is settled by its transaction.
        if (lease.state === 'idle') this.discard(lease);
      });
      return lease;
    }
    throw lastError;
  }

  release(lease: Lease, reusable: boolean): void {
    if (lease.state !== 'busy') return;
    if (!reusable || this.#closed || lease.conn.destroyed) {
      this.discard(lease);
      return;
    }
    const slot = this.#slot(lease.host);
    lease.state = 'idle';
    slot.idle.push(lease);
    lease.idleTimer = setTimeout(() => this.discard(lease), this.#idleMs);
    slot.waiters.shift()?.();
  }

  discard(lease: Lease): void {
    if (lease.state === 'gone') return;
    const slot = this.#slot(lease.host);
    const at = slot.idle.indexOf(lease);
    if (at >= 0) slot.idle.splice(at, 1);
    lease.state = 'gone';
    clearTimeout(lease.idleTimer);
    slot.open--;
    quit(lease);
    slot.waiters.shift()?.();
  }

  async close(): Promise<void> {
    this.#closed = true;
    const leases = [...this.#slots.values()].flatMap((slot) => [...slot.idle]);
    for (const lease of leases) this.discard(lease);
    for (const slot of this.#slots.values()) for (const wake of slot.waiters.splice(0)) wake();
    await Promise.all(leases.map((lease) => lease.ended));
  }
}

function reset(lease: Lease): Promise<boolean> {
  if (lease.conn.destroyed) return Promise.resolve(false);
  return new Promise((resolve) => {
    // A connection the server dropped while idle may never answer: its end settles this.
    lease.ended.then(() => resolve(false));
    lease.conn.reset((error) => resolve(!error));
  });
}

function quit(lease: Lease): void {
  if (lease.conn.destroyed) return;
  const timer = setTimeout(() => lease.conn.close(), QUIT_GRACE_MS);
  lease.ended.then(() => clearTimeout(timer));
  try {
    lease.conn.quit();
  } catch {
    lease.conn.close();
  }
}

export class MxTransport implements MailTransport {
  readonly name = 'mx';
  readonly #options: Required<Omit<MxTransportOptions, 'tls' | 'dnsServers' | 'allowAddresses'>> & { tls: NonNullable<MxTransportOptions['tls']> };
  readonly #allow: ReadonlySet<string>;
  readonly #resolver: Resolver;
  readonly #pool: ConnectionPool;
  readonly #inFlight = new InFlight('mx');

  constructor(options: MxTransportOptions) {
    this.#options = {
      heloName: options.heloName,
      port: options.port ?? 25,
      tls: options.tls ?? {},
      connectTimeoutMs: options.connectTimeoutMs ?? 60_000,
      commandTimeoutMs: options.commandTimeoutMs ?? 300_000,
      dnsTimeoutMs: options.dnsTimeoutMs ?? 5000,
      idleTimeoutMs: options.idleTimeoutMs ?? 5000,
      maxConnectionsPerHost: options.maxConnectionsPerHost ?? 3,
    };
    this.#allow = new Set([...(options.allowAddresses ?? [])].map((a) => a.toLowerCase()));
    this.#resolver = new Resolver({ timeout: this.#options.dnsTimeoutMs, tries: 2 });
    if (options.dnsServers.length > 0) {
      try {
        this.#resolver.setServers(options.dnsServers);
      } catch (error) {
        throw new Error(`mx transport: invalid DNS server list ${JSON.stringify(options.dnsServers)}: ${(error as Error).message}`, { cause: error });
      }
    }
    this.#pool = new ConnectionPool((host, address, useTls) => this.#connect(host, address, useTls), this.#options.maxConnectionsPerHost, this.#options.idleTimeoutMs);
  }

  send(message: OutgoingMessage, options: SendOptions = {}): Promise<TransportOutcome> {
    return this.#inFlight.run(() => this.#send(message, options));
  }

  async #send(message: OutgoingMessage, options: SendOptions): Promise<TransportOutcome> {
    const recipients = [...new Set(message.envelope.recipients)];
    const byDomain = new Map<string, string[]>();
    const outcomes = new Map<string, RecipientOutcome>();
    for (const address of recipients) {
      const domain = routingDomain(address);
      if (!domain) {
        outcomes.set(address, final(address, 'rejected', '5.1.3', `no routable domain in ${JSON.stringify(address)}`));
        continue;
      }
      byDomain.set(domain, [...(byDomain.get(domain) ?? []), address]);
    }
    await Promise.all(
      [...byDomain].map(async ([domain, addresses]) => {
        for (const outcome of await this.#deliverDomain(domain, addresses, message, options)) outcomes.set(outcome.address, outcome);
      }),
    );
    const ordered = recipients.map((address) => outcomes.get(address)!);
    return { providerMessageId: ordered.some((o) => o.result === 'delivered') ? message.messageId : null, recipients: ordered };
  }

  async #route(domain: string): Promise<Route> {
    try {
      const records = await this.#resolver.resolveMx(domain);
      const hosts = records.filter((r) => r.exchange !== '' && r.exchange !== '.');
      if (hosts.length === 0) {
        return { kind: 'final', result: 'rejected', enhancedCode: '5.1.10', response: `${domain} publishes a null MX (RFC 7505): it accepts no mail` };
      }
      const preferences = [...new Set(hosts.map((r) => r.priority))].sort((a, b) => a - b);
      // Hosts of equal preference share the load (RFC 5321 5.1).
      const ordered = preferences.flatMap((p) => shuffled(hosts.filter((r) => r.priority === p)).map((r) => r.exchange.toLowerCase().replace(/\.$/, '')));
      return { kind: 'hosts', hosts: [...new Set(ordered)], implicit: false };
    } catch (error) {
      const code = dnsCode(error);
      if (code === 'ENODATA') return { kind: 'hosts', hosts: [domain], implicit: true };
      if (code === 'ENOTFOUND' || code === 'EBADNAME') {
        return { kind: 'final', result: 'rejected', enhancedCode: '5.1.2', response: `${domain} does not exist (${code})` };
      }
      return { kind: 'final', result: 'deferred', enhancedCode: '4.4.3', response: `MX lookup for ${domain} failed: ${code}` };
    }
  }

  /** IPv4 first: a self-hosted sender's PTR and SPF are usually set up for IPv4 only. */
  async #addresses(host: string): Promise<HostAddresses> {
    let found: string[];
    let codes: string[] = [];
    if (net.isIP(host)) found = [host];
    else {
      const [v4, v6] = await Promise.allSettled([this.#resolver.resolve4(host), this.#resolver.resolve6(host)]);
      found = [...(v4.status === 'fulfilled' ? v4.value : []), ...(v6.status === 'fulfilled' ? v6.value : [])];
      codes = [v4, v6].flatMap((r) => (r.status === 'rejected' ? [dnsCode(r.reason)] : []));
    }
    const refused: string[] = [];
    const addresses = found.filter((address) => {
      const { global, range } = classifyAddress(address);
      if (global || this.#allow.has(address.toLowerCase())) return true;
      refused.push(`${address} (${range})`);
      return false;
    });
    if (addresses.length > 0) return { kind: 'usable', addresses };
    if (refused.length > 0) return { kind: 'refused', response: `${host} resolves only to addresses Relay does not deliver to: ${refused.join(', ')}` };
    const response = `no address for ${host} (${codes.join(', ') || 'empty answer'})`;
    return { kind: codes.every((c) => c === 'ENOTFOUND' || c === 'ENODATA') ? 'none' : 'unknown', response };
  }

  async #deliverDomain(domain: string, addresses: string[], message: OutgoingMessage, options: SendOptions): Promise<RecipientOutcome[]> {
    const route = await this.#route(domain);
    if (route.kind === 'final') return addresses.map((a) => final(a, route.result, route.enhancedCode, route.response));
    const budget = { attempts: MAX_ATTEMPTS_PER_DOMAIN };
    const failures: string[] = [];
    // Whether every host so far was ruled out for good (no address, or none Relay may use).
    let onlyFinal = true;
    let anyRefused = false;
    for (const host of route.hosts) {
      if (budget.attempts <= 0) break;
      const resolved = await this.#addresses(host);
      if (resolved.kind !== 'usable') {
        onlyFinal &&= resolved.kind !== 'unknown';
        anyRefused ||= resolved.kind === 'refused';
        failures.push(resolved.response);
        continue;
      }
      onlyFinal = false;
      let lease: Lease;
      try {
        lease = await this.#pool.acquire(host, resolved.addresses, budget);
      } catch (error) {
        failures.push((error as Error).message);
        continue; // RFC 5321 5.1: on to the next MX host
      }
      // The caller's mark that the transaction begins, once the connection answered: right
      // before MAIL FROM.
      let begun: boolean;
      try {
        begun = options.beginTransaction ? await options.beginTransaction() : true;
      } catch (error) {
        this.#pool.release(lease, true);
        throw error;
      }
      if (!begun) {
        this.#pool.release(lease, true);
        return addresses.map(notBegunOutcome);
      }
      return this.#transaction(lease, domain, addresses, message);
    }
    if (onlyFinal) {
      const [enhancedCode, why] = anyRefused
        ? ['5.4.4', `no MX host of ${domain} has a public address`]
        : route.implicit ? ['5.1.2', `${domain} has neither MX nor address records`] : ['5.4.4', `no MX host of ${domain} has an address`];
      return addresses.map((a) => final(a, 'rejected', enhancedCode, `${why}: ${failures.join('; ')}`));
    }
    const response = failures.join('; ');
    return addresses.map((address) => ({ address, result: 'deferred', smtpCode: null, enhancedCode: null, response, stage: 'connection' }));
  }

  async #transaction(lease: Lease, domain: string, addresses: string[], message: OutgoingMessage): Promise<RecipientOutcome[]> {
    const wire = new Map(addresses.map((a) => [wireAddress(a, domain), a]));
    const rcpts = [...wire.keys()];
    const original = (address: string) => wire.get(address) ?? address;
    const body = new PassThrough();
    let bodySent = false;
    // The connection reads the body only after DATA was accepted; its end means every byte,
    // and with it the end-of-data dot, went to the connection.
    body.once('end', () => (bodySent = true));
    body.end(message.raw);
    const { error, info } = await new Promise<{ error: NodemailerError | null; info?: SMTPConnection.SentMessageInfo }>((resolve) => {
      lease.conn.send({ from: message.envelope.mailFrom, to: rcpts, size: message.raw.length }, body, (err, result) => resolve({ error: err ? asNodemailerError(err) : null, info: result }));
    });
    this.#pool.release(lease, !lease.conn.destroyed && (!error || !isConnectionLevel(error)));

    const withNote = (outcome: RecipientOutcome): RecipientOutcome => (lease.note ? { ...outcome, response: `${outcome.response} (${lease.note})` } : outcome);
    const fromWire = (errors: NodemailerError[] | undefined) => (errors ?? []).map((e) => ({ ...e, message: e.message, recipient: e.recipient && original(e.recipient) }));
    let outcomes: RecipientOutcome[];
    if (!error && info) {
      outcomes = envelopeOutcomes(addresses, info.accepted.map(original), fromWire(info.rejectedErrors), (a) => replyOutcome(a, 'delivered', info.response));
    } else if (error?.code === 'EMESSAGE' && !error.responseCode && error.command === 'MAIL FROM') {
      // nodemailer refused locally: the message is over the SIZE the server announced.
      outcomes = addresses.map((address) => ({ address, result: 'rejected', smtpCode: null, enhancedCode: '5.3.4', response: error.message, stage: 'mail_from' }));
    } else if (error?.code === 'EENVELOPE' && error.command === 'RCPT TO' && error.rejectedErrors?.length) {
      outcomes = envelopeOutcomes(addresses, [], fromWire(error.rejectedErrors), (a) => errorOutcome(a, error, false));
    } else {
      const failure: NodemailerError = error ?? new Error('no result from the connection');
      // Past the envelope, the connection still knows which recipients RCPT TO accepted; only
      // those share the message's fate.
      const envelope = (lease.conn as unknown as { _envelope?: { accepted?: string[]; rejectedErrors?: NodemailerError[] } })._envelope;
      outcomes =
        envelope && (bodySent || failure.command === 'DATA')
          ? envelopeOutcomes(addresses, (envelope.accepted ?? []).map(original), fromWire(envelope.rejectedErrors), (a) => errorOutcome(a, failure, bodySent))
          : addresses.map((a) => errorOutcome(a, failure, bodySent));
    }
    return outcomes.map(withNote);
  }

  #connect(host: string, address: string, useTls: boolean): Promise<Lease> {
    const { tls } = this.#options;
    const conn = new SMTPConnection({
      host: address,
      port: this.#options.port,
      name: this.#options.heloName,
      servername: net.isIP(host) ? undefined : host,
      ignoreTLS: !useTls,
      opportunisticTLS: true,
      tls: { ...(tls.ca ? { ca: tls.ca } : {}), rejectUnauthorized: tls.rejectUnauthorized ?? false },
      connectionTimeout: this.#options.connectTimeoutMs,
      greetingTimeout: this.#options.connectTimeoutMs,
      socketTimeout: this.#options.commandTimeoutMs,
      logger: false,
    });
    let ended!: () => void;
    const lease: Lease = { conn, host, note: null, state: 'busy', idleTimer: undefined, ended: new Promise((resolve) => (ended = resolve)) };
    return new Promise((resolve, reject) => {
      let settled = false;
      // SMTPConnection emits 'error' for the whole of its life; without a listener it would throw.
      conn.on('error', (error) => {
        // Handshake failures surface as socket errors; the upgrade in progress says what they were.
        if (conn.upgrading) Object.assign(error, { duringTls: true });
        if (!settled) {
          settled = true;
          reject(error);
        }
      });
      conn.once('end', () => {
        ended();
        if (!settled) {
          settled = true;
          reject(new Error('connection closed during setup'));
        }
      });
      conn.connect((error) => {
        if (settled) return;
        settled = true;
        if (error) {
          conn.close();
          reject(error);
        } else resolve(lease);
      });
    });
  }

  async close(): Promise<void> {
    if (!(await this.#inFlight.close())) return;
    await this.#pool.close();
  }
}
