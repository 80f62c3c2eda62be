// The `mx` transport: Relay as the MTA. Per recipient domain of a call it looks up the MX
// hosts (RFC 5321 5.1: implicit MX when there are none, RFC 7505 null MX), connects to them in
// preference order and runs one transaction (MAIL FROM, RCPT TO per recipient, DATA): at the
// next host when one failed it before any of the body went out (it took nothing of the message)
// and the caller's grace for a begun transaction still covers one more.
//
// TLS: STARTTLS whenever offered (mx-connections.ts). Without a policy it is opportunistic:
// a certificate that cannot be verified is used anyway and a failed handshake falls back to
// plain text, because refusing would only push the message onto plain text. A recipient
// domain's MTA-STS policy (mta-sts.ts) in `enforce` mode changes that: only MX hosts matching
// the policy, only over TLS with a certificate valid for the host; anything else is a
// temporary failure naming MTA-STS. `testing` delivers as before and reports. Every session's
// TLS outcome goes to the TLS report sink (RFC 8460) once, when it is set up: RFC 8460 4.4
// counts sessions, so a connection reused from the pool is not counted again, and a session has
// one result (under `testing`, one to an MX host the policy does not list is that mismatch;
// under `enforce` such a host is passed over, and counted as the session it would have been:
// once per attempt that sets sessions up, not again for messages a pooled session carries).
// A send with `ignoreTlsPolicy` (TLS reports by mail, RFC 8460 5.3.1) is judged and counted
// under the domain's policies all the same, so that the domain's report tells the truth, but
// they decide nothing: TLS is opportunistic.
//
// Connections are pooled per MX host (a receiver like Gmail serves many domains).
//
// Only public addresses are connected to (the webhook egress rule, infra/http/address-ranges.ts):
// whoever controls a recipient domain's DNS controls where its MX points, and an MX on loopback
// or a private network would reach a relay that trusts this host. The connection goes to the
// address that was checked, never to a name looked up again.
import { DnsCache } from '../dns/dns-cache.ts';
import { StubResolver } from '../dns/stub-resolver.ts';
import { classifyAddress } from '../http/address-ranges.ts';
import { InFlight } from './in-flight.ts';
import net from 'node:net';
import { domainToASCII } from 'node:url';
import type SMTPConnection from 'nodemailer/lib/smtp-connection/index.js';
import { notBegunOutcome, type MailTransport, type OutgoingMessage, type RecipientOutcome, type RecipientResult, type SendOptions, type TransportOutcome } from '../ports/mail-transport.ts';
import { ConnectionPool, SessionRefused, SetupFailed, type Lease, type SessionRequirement, type SetupReply } from './mx-connections.ts';
import { mxMatchesPolicy, type MtaStsPolicy, type MtaStsResolver, type PolicyFailure } from './mta-sts.ts';
import { envelopeOutcomes, errorOutcome, isConnectionLevel, parseQueueId, replyOutcome } from './smtp-replies.ts';
import type { NodemailerError } from './smtp-replies.ts';
import type { TlsFailureType, TlsPolicyApplied, TlsSessionSink, TlsVerdict } from './tls-sessions.ts';
import { daneMismatch, tlsaText, usableTlsa } from './dane.ts';
import { MIN_BODY_BYTES_PER_SECOND, transact, transactionDeadlineMs, type SessionLog, type TransactionLimits } from './pooled-sessions.ts';
import { createHash } from 'node:crypto';

export interface MxTransportOptions {
  /** Resolvers, `IP` or `IP:port` (`[v6]:port`). Empty: the system's (/etc/resolv.conf). Unused when `dns` is given. */
  dnsServers: string[];
  /** The DNS cache to look up through (shared with whatever else looks up mail DNS); default one of its own on dnsServers. */
  dns?: DnsCache;
  /** EHLO name; should be the sending IP's PTR name. */
  heloName: string;
  /** RELAY_MX_PORT: the port every MX connection goes to. Default 25; tests point it elsewhere. */
  port?: number;
  tls?: {
    ca?: string | Buffer | Array<string | Buffer>;
    /** Default false: see the file comment. */
    rejectUnauthorized?: boolean;
  };
  /** Setting a session up, as a whole however its replies trickle in: TCP connect, greeting, EHLO, STARTTLS and EHLO again. Default 60 s. */
  connectTimeoutMs?: number;
  /** Longest wait for any later reply, the one after DATA included. Default 5 min (RFC 5321 4.5.3.2). */
  commandTimeoutMs?: number;
  /** The slowest an MX host may read a message body: n bytes have max(commandTimeoutMs, n at this rate). Default MIN_BODY_BYTES_PER_SECOND (pooled-sessions.ts). */
  minBodyBytesPerSecond?: number;
  /** Where connections given up on (a failed RSET) are told. Default: nowhere. */
  log?: SessionLog;
  /** Per DNS query attempt. Default 5 s. */
  dnsTimeoutMs?: number;
  /** How long an unused connection stays open for the next transaction. Default 5 s. */
  idleTimeoutMs?: number;
  /** Open connections per MX host. Default 3. */
  maxConnectionsPerHost?: number;
  /** Transactions one connection carries before it is closed (the site's messages_per_connection). Default unlimited. */
  messagesPerConnection?: (host: string) => number;
  /**
   * RELAY_MX_ALLOW (tests only): addresses outside the public ranges that MX connections may go
   * to anyway, such as a test's SMTP server on 127.0.0.1. Exact addresses, as DNS answers them.
   */
  allowAddresses?: ReadonlySet<string>;
  /** MTA-STS policies of recipient domains; unset: none are looked up. */
  mtaSts?: MtaStsResolver;
  /** Where each TLS session's outcome is told (TLS reporting). */
  tlsReports?: TlsSessionSink;
  /** How long a session refused by a required TLS policy keeps its address passed over (mx-connections.ts). Default 5 min. */
  refusalMemoryMs?: number;
  /** The monotonic clock (ms) of that memory and of a begun transaction's grace (tests). Default performance.now. */
  monotonicNow?: () => number;
}

/** What TLS the recipient domain's policy asks of one MX host's sessions. */
interface HostPolicy {
  requirement: SessionRequirement;
  applied: TlsPolicyApplied;
  /** How a session measures up to this policy, in TLS-RPT terms (null problem: success). */
  judge: (verdict: TlsVerdict) => { problem: TlsFailureType | null; detail: string };
}

const NO_POLICY = (domain: string): TlsPolicyApplied => ({ type: 'no-policy-found', domain, strings: [], mxHosts: [] });
const stsApplied = (policy: MtaStsPolicy): TlsPolicyApplied => ({ type: 'sts', domain: policy.domain, strings: policy.lines, mxHosts: policy.mx });
/** Sessions that need not be verified share one pool slot per host. */
const opportunistic = (host: string): SessionRequirement => ({ key: `${host} opportunistic`, required: false, accept: () => null });

/** Connection attempts per domain and call, over all its MX hosts and their addresses. */
const MAX_ATTEMPTS_PER_DOMAIN = 5;
/**
 * MX hosts one call considers per domain, at most, in preference order (Postfix's
 * smtp_mx_address_limit, Exim's hosts_max_try). Each host considered costs DNS work (its A and
 * AAAA lookups, TLSA under DANE) whether or not it is connected to, and a host whose lookups fail
 * costs no connection attempt: without this bound a domain that lists many MX hosts that do not
 * resolve makes one call wait out every one's DNS timeouts, and does again on every retry.
 * Twice the connection budget, so that a few hosts that do not resolve (or that a TLS policy
 * passes over) still leave the whole budget to usable ones; hosts of equal preference are
 * shuffled, so a later attempt may consider others.
 */
const MAX_MX_HOSTS_PER_DOMAIN = 10;

/** What an MX host's addresses allow: some to connect to, or why there are none. */
type HostAddresses =
  /** `authenticated`: every answer the addresses came from carried the AD bit (DANE needs it). */
  | { kind: 'usable'; addresses: string[]; authenticated: boolean }
  /** DNS says the host has no address (NXDOMAIN, no A/AAAA): final, like a missing host. */
  | { kind: 'none'; response: string }
  /** Every address is outside the public ranges: final too, whatever a retry would look up. */
  | { kind: 'refused'; response: string }
  /** The lookup failed (timeout, SERVFAIL): a retry may do better. */
  | { kind: 'unknown'; response: string };

type Route =
  /** `secure`: the MX answer (or, implicit, its absence) carried the AD bit. */
  | { kind: 'hosts'; hosts: string[]; implicit: boolean; secure: boolean }
  | { kind: 'final'; result: RecipientResult; enhancedCode: string; response: string };

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

export class MxTransport implements MailTransport {
  readonly name = 'mx';
  readonly #options: Required<Omit<MxTransportOptions, 'tls' | 'dnsServers' | 'allowAddresses' | 'dns' | 'mtaSts' | 'tlsReports' | 'messagesPerConnection' | 'refusalMemoryMs' | 'monotonicNow' | 'log'>> & { tls: NonNullable<MxTransportOptions['tls']> };
  readonly #mtaSts: MtaStsResolver | null;
  readonly #tlsReports: TlsSessionSink | null;
  readonly #allow: ReadonlySet<string>;
  readonly #dns: DnsCache;
  readonly #pool: ConnectionPool;
  readonly #limits: TransactionLimits;
  readonly #monotonicNow: () => number;
  readonly #inFlight = new InFlight('mx');
  /**
   * MTA-STS failures already counted where they were met (the lookup that fetched): the resolver
   * hands the same failure to every lookup while it remembers it, and those are counted per
   * session they lead to, not per message.
   */
  readonly #countedFailures = new WeakSet<PolicyFailure>();

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
      minBodyBytesPerSecond: options.minBodyBytesPerSecond ?? MIN_BODY_BYTES_PER_SECOND,
    };
    this.#allow = new Set([...(options.allowAddresses ?? [])].map((a) => a.toLowerCase()));
    this.#limits = { replyMs: this.#options.commandTimeoutMs, minBodyBytesPerSecond: this.#options.minBodyBytesPerSecond };
    this.#monotonicNow = options.monotonicNow ?? (() => performance.now());
    try {
      this.#dns = options.dns ?? new DnsCache(new StubResolver({ servers: options.dnsServers, timeoutMs: this.#options.dnsTimeoutMs }));
    } catch (error) {
      throw new Error(`mx transport: invalid DNS server list ${JSON.stringify(options.dnsServers)}: ${(error as Error).message}`, { cause: error });
    }
    this.#mtaSts = options.mtaSts ?? null;
    this.#tlsReports = options.tlsReports ?? null;
    const { port, heloName, tls, connectTimeoutMs, commandTimeoutMs } = this.#options;
    this.#pool = new ConnectionPool(
      { port, heloName, tls, connectTimeoutMs, commandTimeoutMs }, this.#options.maxConnectionsPerHost, this.#options.idleTimeoutMs, options.messagesPerConnection,
      { memoryMs: options.refusalMemoryMs, monotonicNow: options.monotonicNow }, options.log,
    );
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
    // The receiving MX's queue id when its 250 names one (Postfix, Exim, Microsoft…), else the Message-ID.
    const delivered = ordered.find((o) => o.result === 'delivered');
    return { providerMessageId: delivered ? (parseQueueId(delivered.response) ?? message.messageId) : null, recipients: ordered };
  }

  async #route(domain: string): Promise<Route> {
    let found;
    try {
      found = await this.#dns.mx(domain);
    } catch (error) {
      return { kind: 'final', result: 'deferred', enhancedCode: '4.4.3', response: `MX lookup for ${domain} failed: ${dnsCode(error)}` };
    }
    if (found.kind === 'nodata') return { kind: 'hosts', hosts: [domain], implicit: true, secure: found.authenticated };
    if (found.kind === 'nxdomain') return { kind: 'final', result: 'rejected', enhancedCode: '5.1.2', response: `${domain} does not exist (ENOTFOUND)` };
    const hosts = found.records.filter((r) => r.exchange !== '' && r.exchange !== '.');
    if (hosts.length === 0) {
      return { kind: 'final', result: 'rejected', enhancedCode: '5.1.10', response: `${domain} publishes a null MX (RFC 7505): it accepts no mail` };
    }
    const preferences = [...new Set(hosts.map((r) => r.priority))].sort((a, b) => a - b);
    // Hosts of equal preference share the load (RFC 5321 5.1).
    const ordered = preferences.flatMap((p) => shuffled(hosts.filter((r) => r.priority === p)).map((r) => r.exchange.toLowerCase()));
    return { kind: 'hosts', hosts: [...new Set(ordered)], implicit: false, secure: found.authenticated };
  }

  /** IPv4 first: a self-hosted sender's PTR and SPF are usually set up for IPv4 only. */
  async #addresses(host: string): Promise<HostAddresses> {
    let found: string[];
    let codes: string[] = [];
    let authenticated = false;
    if (net.isIP(host)) found = [host];
    else {
      const [v4, v6] = await Promise.allSettled([this.#dns.addresses(host, 4), this.#dns.addresses(host, 6)]);
      const answered = [v4, v6].flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
      found = answered.flatMap((a) => (a.kind === 'answer' ? a.records : []));
      // As Postfix judges each address by its own RRset: a lookup that failed (a timeout, or
      // SERVFAIL, which a validating resolver also answers for a tampered RRset) gives no
      // addresses and does not make the others insecure, or whoever can break one family's
      // lookup turns DANE off for the host. An answer without the AD bit proves the zone
      // unsigned, so a family that failed could not have been secure then either.
      authenticated = answered.length > 0 && answered.every((a) => a.authenticated);
      codes = [v4, v6].flatMap((r) => (r.status === 'rejected' ? [dnsCode(r.reason)] : r.value.kind === 'nxdomain' ? ['ENOTFOUND'] : r.value.kind === 'nodata' ? ['ENODATA'] : []));
    }
    const refused: string[] = [];
    const addresses = found.filter((address) => {
      const { global, range } = classifyAddress(address);
      if (global || this.#allow.has(address.toLowerCase())) return true;
      refused.push(`${address} (${range})`);
      return false;
    });
    if (addresses.length > 0) return { kind: 'usable', addresses, authenticated };
    if (refused.length > 0) return { kind: 'refused', response: `${host} resolves only to addresses Relay does not deliver to: ${refused.join(', ')}` };
    const response = `no address for ${host} (${codes.join(', ') || 'empty answer'})`;
    return { kind: codes.every((c) => c === 'ENOTFOUND' || c === 'ENODATA') ? 'none' : 'unknown', response };
  }

  /**
   * The MTA-STS policy (or none) for sessions to MX host `host` of `domain`. `unlisted`: why the
   * host does not match the policy's mx patterns, when it does not (and is used anyway: under
   * `testing`, or a policy not honored). `honor`: false, the policy is judged but decides nothing.
   */
  #stsHostPolicy(domain: string, host: string, sts: MtaStsPolicy | null, unlisted: string | null, honor: boolean): HostPolicy {
    if (sts && sts.mode !== 'none') {
      const enforce = sts.mode === 'enforce' && honor;
      const label = `MTA-STS (${sts.mode}) of ${domain}`;
      // A host the policy does not list fails it whatever its certificate (RFC 8461 4.1 checks
      // the name first): that is the session's one result.
      const judge = unlisted !== null
        ? (): { problem: TlsFailureType | null; detail: string } => ({ problem: 'validation-failure', detail: unlisted })
        : (verdict: TlsVerdict) => ({ problem: verdict.problem, detail: verdict.detail });
      return {
        applied: stsApplied(sts),
        judge,
        requirement: enforce
          ? {
            // Sessions that must be verified never share a pool slot with opportunistic ones.
            key: `${host} webpki`,
            required: true,
            accept: (verdict) => (verdict.problem ? `${label}: ${verdict.detail}` : null),
          }
          : opportunistic(host),
      };
    }
    return {
      applied: NO_POLICY(domain),
      // Without a policy only the lack of encryption is worth reporting.
      judge: (verdict) => ({ problem: verdict.encrypted ? null : 'starttls-not-supported', detail: verdict.detail }),
      requirement: opportunistic(host),
    };
  }

  /**
   * DANE (RFC 7672) for MX host `host`, when Relay asks a validating resolver
   * (RELAY_DNSSEC_RESOLVER): only when the MX answer and the host's addresses were secure
   * (AD bit) and a secure TLSA RRset exists at _<port>._tcp.<host>. Null: DANE does not apply.
   * 'unusable': the host's zone is signed but its TLSA lookup failed, so the host cannot be used.
   */
  async #danePolicy(domain: string, host: string, mxSecure: boolean, addressesSecure: boolean): Promise<HostPolicy | { unusable: string } | null> {
    if (!this.#dns.dnssec || !mxSecure || !addressesSecure || net.isIP(host)) return null;
    const name = `_${this.#options.port}._tcp.${host}`;
    let found;
    try {
      found = await this.#dns.tlsa(name);
    } catch (error) {
      return { unusable: `DANE: TLSA lookup for ${name} failed (${dnsCode(error)}); the host is not used until it answers` };
    }
    if (found.kind !== 'answer' || !found.authenticated) return null;
    const usable = usableTlsa(found.records);
    const label = `DANE (TLSA ${name})`;
    const applied: TlsPolicyApplied = { type: 'tlsa', domain, strings: found.records.map(tlsaText), mxHosts: [host] };
    const judge = (verdict: TlsVerdict): { problem: TlsFailureType | null; detail: string } => {
      if (!verdict.encrypted) return { problem: verdict.problem === 'starttls-not-supported' ? 'starttls-not-supported' : 'validation-failure', detail: verdict.detail };
      // TLSA records none of which are usable still require TLS, without authentication (RFC 7672 2.2).
      if (usable.length === 0) return { problem: null, detail: 'encrypted (no usable TLSA record)' };
      const mismatch = daneMismatch(verdict.chain, usable, host);
      return mismatch ? { problem: 'validation-failure', detail: mismatch } : { problem: null, detail: 'TLSA matched' };
    };
    const key = createHash('sha256').update(applied.strings.join('\n')).digest('hex').slice(0, 16);
    return {
      applied,
      judge,
      requirement: { key: `${host} dane:${key}`, required: true, accept: (verdict) => { const j = judge(verdict); return j.problem ? `${label}: ${j.detail}` : null; } },
    };
  }

  #report(domain: string, applied: TlsPolicyApplied, outcome: { problem: TlsFailureType | null; detail: string }, host?: string, address?: string, sendingIp?: string | null): void {
    this.#tlsReports?.record({
      recipientDomain: domain,
      policy: applied,
      result: outcome.problem ?? 'success',
      ...(host ? { mxHost: host } : {}),
      ...(address ? { receivingIp: address } : {}),
      ...(sendingIp ? { sendingIp } : {}),
      ...(outcome.problem ? { detail: outcome.detail } : {}),
      at: new Date(),
    });
  }

  /**
   * The domain's MTA-STS policy, and a failure to fetch it that is still to be counted with each
   * session this message opens (one the resolver remembers, counted already where it was met).
   */
  async #stsPolicy(domain: string): Promise<{ policy: MtaStsPolicy | null; perSession: (() => void) | null }> {
    if (!this.#mtaSts) return { policy: null, perSession: null };
    const { policy, failure } = await this.#mtaSts.policyFor(domain);
    if (!failure) return { policy, perSession: null };
    const count = () => this.#report(domain, policy ? stsApplied(policy) : NO_POLICY(domain), { problem: failure.resultType, detail: failure.detail });
    if (this.#countedFailures.has(failure)) return { policy, perSession: count };
    this.#countedFailures.add(failure);
    count();
    return { policy, perSession: null };
  }

  /**
   * One attempt at a domain's MX hosts. A host its `enforce` policy passes over (or one whose TLSA
   * lookup failed, which DANE leaves unused) opens no session, yet it is the session that would
   * have been made, and TLS reports count sessions (RFC 8460 4.4), as they count, under
   * `testing`, the one session to such a host however many messages it carries. So a host passed over is counted once per attempt that sets up sessions, or would
   * have: with the first session the attempt sets up or has refused, or when it ends without one
   * (its mail deferred: the next attempt, which would connect anew, counts it again); not when a
   * pooled session carries the message, which sets none up (the host was counted with the attempt
   * that set that session up; #tryHosts drops it).
   */
  async #deliverDomain(domain: string, addresses: string[], message: OutgoingMessage, options: SendOptions): Promise<RecipientOutcome[]> {
    const passedOver: Array<() => void> = [];
    try {
      return await this.#tryHosts(domain, addresses, message, options, passedOver);
    } finally {
      for (const count of passedOver.splice(0)) count();
    }
  }

  async #tryHosts(domain: string, addresses: string[], message: OutgoingMessage, options: SendOptions, passedOver: Array<() => void>): Promise<RecipientOutcome[]> {
    const route = await this.#route(domain);
    if (route.kind === 'final') return addresses.map((a) => final(a, route.result, route.enhancedCode, route.response));
    const { policy: sts, perSession } = await this.#stsPolicy(domain);
    // RFC 8460 5.3.1: a TLS report by mail does not honor the failures it may be reporting.
    const honor = !options.ignoreTlsPolicy;
    // Each session set up (accepted or refused) counts once, after the hosts passed over before it.
    const counted = (policy: HostPolicy, verdict: TlsVerdict, host: string, address: string, sendingIp?: string | null) => {
      for (const count of passedOver.splice(0)) count();
      perSession?.();
      this.#report(domain, policy.applied, policy.judge(verdict), host, address, sendingIp);
    };
    const budget = { attempts: MAX_ATTEMPTS_PER_DOMAIN };
    const failures: string[] = [];
    // Whether every host so far was ruled out for good (no address, or none Relay may use).
    let onlyFinal = true;
    let anyRefused = false;
    // Whether every failure so far was a TLS policy's (for the stage of the response).
    let onlyPolicy = true;
    // The latest reply that refused a session (421 in the greeting…): a deferral carries its codes for the site's backoff.
    let refusedWith: SetupReply | null = null;
    const considered = route.hosts.slice(0, MAX_MX_HOSTS_PER_DOMAIN);
    // The caller's mark that the transaction begins is made once, before the first MAIL FROM:
    // a host moved on from took nothing of the message, so the next one carries on the same
    // transaction, but only while it can end, at its every deadline, within the caller's grace
    // after the mark.
    let begunAt: number | null = null;
    const neededMs = transactionDeadlineMs(message.raw.length, this.#limits);
    const leftMs = () => (begunAt === null || options.transactionGraceMs === undefined ? Infinity : begunAt + options.transactionGraceMs - this.#monotonicNow());
    // The last transaction moved on from: its outcomes, stated as `failures[at]`, each recipient's
    // own to return should no later host run one.
    let movedFrom: { outcomes: RecipientOutcome[]; at: number; named: (response: string) => string } | null = null;
    const movedOutcomes = (moved: NonNullable<typeof movedFrom>) => {
      const [before, after] = [failures.slice(0, moved.at), failures.slice(moved.at + 1)];
      return moved.outcomes.map((o) => ({ ...o, response: [...before, moved.named(o.response), ...after].join('; '), reply: o.response }));
    };
    const outOfTime = (at: number) => {
      const left = leftMs();
      if (left >= neededMs) return false;
      failures.push(`${route.hosts.length - at} more MX hosts of ${domain} not tried: ${Math.max(0, Math.round(left / 1000))} s left of the begun transaction's grace, one takes up to ${Math.round(neededMs / 1000)} s`);
      return true;
    };
    for (const [at, host] of considered.entries()) {
      if (budget.attempts <= 0) break;
      if (movedFrom && outOfTime(at)) return movedOutcomes(movedFrom);
      const resolved = await this.#addresses(host);
      if (resolved.kind !== 'usable') {
        onlyFinal &&= resolved.kind !== 'unknown';
        anyRefused ||= resolved.kind === 'refused';
        onlyPolicy = false;
        failures.push(resolved.response);
        continue;
      }
      onlyFinal = false;
      // DANE, where it applies, takes precedence over MTA-STS (RFC 8461 2).
      const dane = await this.#danePolicy(domain, host, route.secure, resolved.authenticated);
      let policy: HostPolicy;
      if (dane && 'unusable' in dane) {
        const applied: TlsPolicyApplied = { type: 'tlsa', domain, strings: [], mxHosts: [host] };
        if (honor) {
          failures.push(`${host}: ${dane.unusable}`);
          // No session: counted as the session it would have been, as a host an enforce policy passes over.
          const detail = dane.unusable;
          passedOver.push(() => this.#report(domain, applied, { problem: 'dnssec-invalid', detail }, host));
          continue;
        }
        policy = { applied, judge: () => ({ problem: 'dnssec-invalid', detail: dane.unusable }), requirement: opportunistic(host) };
      } else if (dane) {
        policy = honor ? dane : { ...dane, requirement: opportunistic(host) };
      } else {
        let unlisted: string | null = null;
        if (sts && sts.mode !== 'none' && !mxMatchesPolicy(host, sts)) {
          unlisted = `MX host ${host} does not match the policy's mx patterns (${sts.mx.join(', ')})`;
          if (sts.mode === 'enforce' && honor) {
            // No session: the host is no candidate (RFC 8461 4.1). Counted as the session it
            // would have been, once per attempt that sets sessions up (#deliverDomain).
            const detail = unlisted;
            passedOver.push(() => this.#report(domain, stsApplied(sts), { problem: 'validation-failure', detail }, host));
            failures.push(`MTA-STS (enforce) of ${domain}: ${unlisted}`);
            continue;
          }
        }
        policy = this.#stsHostPolicy(domain, host, sts, unlisted, honor);
      }
      let lease: Lease;
      try {
        lease = await this.#pool.acquire(host, resolved.addresses, budget, policy.requirement);
      } catch (error) {
        // Every session a policy refused in the attempt is reported, whatever ended it; a
        // remembered refusal opened no session: it was reported when it happened.
        if (error instanceof SessionRefused || error instanceof SetupFailed) {
          for (const refused of error.refusals) counted(policy, refused.verdict, host, refused.address);
        }
        if (error instanceof SessionRefused) {
          // Still a deferral, but not a policy's alone: the host's reply decides the site's backoff.
          if (error.earlier) {
            onlyPolicy = false;
            refusedWith = error.earlier.reply ?? refusedWith;
            failures.push(error.earlier.message);
          }
        } else {
          onlyPolicy = false;
          if (error instanceof SetupFailed) {
            refusedWith = error.reply ?? refusedWith;
            failures.push(...error.refusals.map((refused) => refused.message));
          }
        }
        failures.push((error as Error).message);
        continue; // RFC 5321 5.1: on to the next MX host
      }
      if (lease.fresh) counted(policy, lease.tls, host, lease.address, lease.localAddress);
      // A pooled session: none set up, nor would one have been to the hosts passed over before it.
      else passedOver.length = 0;
      if (begunAt === null) {
        // Once the connection answered: right before MAIL FROM.
        const markedAt = this.#monotonicNow();
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
        begunAt = markedAt;
      } else if (outOfTime(at)) {
        // The session's setup took what was left.
        this.#pool.release(lease, true);
        return movedOutcomes(movedFrom!);
      }
      const { outcomes, movable } = await this.#transaction(lease, domain, addresses, message);
      const named = (response: string) => `${host} [${lease.address}]: ${response}`;
      // RFC 5321 5.1: on to the next MX host, as after a failed setup, while the budget allows.
      if (movable && at < considered.length - 1 && budget.attempts > 0) {
        movedFrom = { outcomes, at: failures.length, named };
        const responses = [...new Set(outcomes.map((o) => o.response))];
        failures.push(named(responses.length === 1 ? responses[0] : outcomes.map((o) => `${o.address}: ${o.response}`).join(', ')));
        continue;
      }
      // A deferral says what the hosts before this one answered too, and keeps its own reply
      // apart (the site judges this host's words alone); other outcomes are this host's reply
      // alone (a 250 names its queue id, a refusal is classified by its text).
      return failures.length === 0 ? outcomes : outcomes.map((o) => (o.result === 'deferred' ? { ...o, response: [...failures, named(o.response)].join('; '), reply: o.response } : o));
    }
    // Hosts left out may have addresses: only a verdict on every host is final.
    const leftOut = route.hosts.length - considered.length;
    if (leftOut > 0) failures.push(`${leftOut} more MX hosts of ${domain} not tried in this attempt`);
    // No host after the last transaction ran one: its recipients keep their own replies (codes,
    // stage: the site's backoff sees a 421 as it would have without the move), each followed by
    // what the later hosts did.
    if (movedFrom) return movedOutcomes(movedFrom);
    if (onlyFinal && leftOut === 0) {
      const [enhancedCode, why] = anyRefused
        ? ['5.4.4', `no MX host of ${domain} has a public address`]
        : route.implicit ? ['5.1.2', `${domain} has neither MX nor address records`] : ['5.4.4', `no MX host of ${domain} has an address`];
      return addresses.map((a) => final(a, 'rejected', enhancedCode, `${why}: ${failures.join('; ')}`));
    }
    const response = failures.join('; ');
    const stage = onlyPolicy && failures.length > 0 ? 'tls' : 'connection';
    return addresses.map((address) => ({ address, result: 'deferred', smtpCode: refusedWith?.smtpCode ?? null, enhancedCode: refusedWith?.enhancedCode ?? null, response, stage }));
  }

  /**
   * One transaction on the lease. `movable`: every recipient was deferred before any of the
   * body went out (a lost connection or 421 before DATA, a 4xx to MAIL FROM, to every RCPT TO
   * or to DATA), so nothing of the message reached the host and another may be tried without
   * risking a duplicate. A begun transaction's recipients stay open for a grace sized for one mx
   * transaction at its deadlines (domain/email/delivery.ts), which every host tried under the
   * one begin mark spends: one that let a deadline run out spent a whole deadline of it, and is
   * never moved on from; slow hosts that each answer just inside their deadlines spend it as
   * surely, so #deliverDomain starts a transaction at another host only while what is left of the
   * caller's grace (SendOptions.transactionGraceMs) covers a whole one.
   */
  async #transaction(lease: Lease, domain: string, addresses: string[], message: OutgoingMessage): Promise<{ outcomes: RecipientOutcome[]; movable: boolean }> {
    const wire = new Map(addresses.map((a) => [wireAddress(a, domain), a]));
    const rcpts = [...wire.keys()];
    const original = (address: string) => wire.get(address) ?? address;
    const { error, info, bodyBegan, bodySent } = await transact(lease.conn, { from: message.envelope.mailFrom, to: rcpts, size: message.raw.length } as SMTPConnection.Envelope, message.raw, this.#limits);
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
    const movable = error !== null && !bodyBegan && error.code !== 'ETIMEDOUT' && outcomes.every((o) => o.result === 'deferred');
    return { outcomes: outcomes.map(withNote), movable };
  }

  async close(): Promise<void> {
    if (!(await this.#inFlight.close())) return;
    await this.#pool.close();
  }
}
