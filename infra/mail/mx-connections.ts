// SMTP connections to MX hosts, pooled: an idle connection stays open for idleMs and is checked
// with RSET before its next transaction. A pool slot is one MX host under one TLS requirement
// (`key`), so a connection opened for opportunistic TLS (maybe in plain text) is never reused
// for a domain whose policy requires authenticated TLS.
//
// TLS is STARTTLS whenever offered, certificates checked but not required by default:
// `accept` judges each new session (encrypted? trusted? naming the host? matching TLSA?) and a
// session it refuses is closed before any envelope is sent. Without a requirement, a failed
// handshake falls back to plain text on a new connection (refusing an unverifiable certificate
// would only push the message onto plain text), noted in the responses.
//
// A session refused under a requirement (a certificate that does not name the host, an
// untrusted chain, a failed handshake, a TLSA mismatch) is remembered for `refusalMemoryMs` per
// (requirement key, address): until then that address is passed over without a connection, so
// a host that fails the check costs one handshake per period, not one per message. A remembered
// refusal is not a new session, so it is not counted again for TLS reports. The period is kept
// in monotonic time (a wall clock stepped back must not lengthen it by the size of the step);
// the times a remembered refusal names are wall times, read when it is named.
//
// A slot lives only while something is in it (a connection open, idle or on its way back, or an
// acquire waiting): MX hosts are chosen by recipient domains, so a slot kept for every host ever
// used would grow with every address anyone gives.
import net from 'node:net';
import type { TLSSocket } from 'node:tls';
import SMTPConnection from 'nodemailer/lib/smtp-connection/index.js';
import { asNodemailerError, isTlsFailure, MAX_REPLY_BYTES, parseSmtpReply, peerTextForLog, type NodemailerError } from './smtp-replies.ts';
import { afterPendingReplies, quit, reset, setupDeadline, type SessionLog } from './pooled-sessions.ts';
import { judgeTls, type TlsVerdict } from './tls-sessions.ts';

export interface Lease {
  conn: SMTPConnection;
  host: string;
  /** The address connected to. */
  address: string;
  /** This end's address of the connection. */
  localAddress: string | null;
  key: string;
  /** Why this connection is in plain text although TLS was tried, for the responses. */
  note: string | null;
  /** How the session's TLS measured up, judged once when it was set up. */
  tls: TlsVerdict;
  /** A session opened by this acquire (not reused from the pool): it counts for TLS reports. */
  fresh: boolean;
  /** Transactions this connection has carried. */
  uses: number;
  /** releasing: back from a transaction, kept once its pending replies are taken up (afterPendingReplies). */
  state: 'busy' | 'releasing' | 'idle' | 'gone';
  idleTimer: NodeJS.Timeout | undefined;
  ended: Promise<void>;
}

export interface ConnectOptions {
  port: number;
  heloName: string;
  tls: { ca?: string | Buffer | Array<string | Buffer>; rejectUnauthorized?: boolean };
  connectTimeoutMs: number;
  commandTimeoutMs: number;
}

export interface SessionRequirement {
  /** Pool key: the host and what its sessions must satisfy. */
  key: string;
  /** TLS is required: no plain-text fallback, and a session `accept` refuses is closed. */
  required: boolean;
  /** Null to accept the session, or why it is refused (policy failures only when required). */
  accept: (verdict: TlsVerdict, host: string) => string | null;
}

/** A session refused by its requirement: what TLS reporting and the response need to know. */
export class SessionRefused extends Error {
  readonly verdict: TlsVerdict;
  readonly address: string;
  /** The refusal of an earlier session, remembered: no connection was made this time. */
  readonly remembered: boolean;
  /**
   * A reply with which another address of the host refused a session before this refusal ended
   * the attempt (a 421 greeting…). The refusal has no reply code of its own, and the site's
   * backoff is decided by that code, so it must not be lost with the other address.
   */
  readonly earlier: SetupFailed | null;
  /** The sessions a policy refused during the attempt, this one included unless remembered: each to be reported (see SetupFailed). */
  refusals: readonly SessionRefused[] = [];
  constructor(message: string, verdict: TlsVerdict, address: string, remembered = false, earlier: SetupFailed | null = null) {
    super(message);
    this.name = 'SessionRefused';
    this.verdict = verdict;
    this.address = address;
    this.remembered = remembered;
    this.earlier = earlier;
  }

  after(earlier: SetupFailed): SessionRefused {
    return new SessionRefused(this.message, this.verdict, this.address, this.remembered, earlier);
  }
}

/** A server's reply that refused a session being set up (421 in the greeting or to EHLO). */
export interface SetupReply {
  smtpCode: number;
  enhancedCode: string | null;
}

/**
 * No session to the host could be set up, for some other reason than its TLS policy. `reply`:
 * the latest reply with which one of its addresses refused, kept apart from the text because
 * the site's backoff is decided by the code (a 421 there says to slow down as one to MAIL FROM does).
 */
export class SetupFailed extends Error {
  readonly reply: SetupReply | null;
  /**
   * Sessions a policy refused at other addresses of the host before this failure ended the
   * attempt: TLS reporting counts each (RFC 8460), whatever ended the attempt.
   */
  refusals: readonly SessionRefused[] = [];
  constructor(message: string, reply: SetupReply | null) {
    super(message);
    this.name = 'SetupFailed';
    this.reply = reply;
  }
}

/** The reply a failed setup ended with, when the server gave one (nodemailer's responseCode). */
function setupReplyOf(error: NodemailerError): SetupReply | null {
  if (!error.responseCode) return null;
  const parsed = error.response ? parseSmtpReply(error.response) : null;
  return { smtpCode: parsed?.code ?? error.responseCode, enhancedCode: parsed?.enhancedCode ?? null };
}

/** How long a refused session's verdict is remembered for its (requirement, address), by default. */
export const REFUSAL_MEMORY_MS = 5 * 60_000;

interface HostSlot {
  idle: Lease[];
  open: number;
  /** Leases back from a transaction, not idle yet (release): up to this many acquires wait for them rather than open others. */
  releasing: number;
  waiters: Array<() => void>;
}

/** Opens one SMTP session to `address` (for MX host `host`) up to EHLO, after STARTTLS when `useTls`. */
function connect(options: ConnectOptions, host: string, address: string, key: string, useTls: boolean): Promise<Lease> {
  const conn = new SMTPConnection({
    host: address,
    port: options.port,
    name: options.heloName,
    servername: net.isIP(host) ? undefined : host,
    ignoreTLS: !useTls,
    opportunisticTLS: true,
    tls: { ...(options.tls.ca ? { ca: options.tls.ca } : {}), rejectUnauthorized: options.tls.rejectUnauthorized ?? false },
    connectionTimeout: options.connectTimeoutMs,
    greetingTimeout: options.connectTimeoutMs,
    socketTimeout: options.commandTimeoutMs,
    maxResponseSize: MAX_REPLY_BYTES,
    logger: false,
  });
  let ended!: () => void;
  const lease: Lease = {
    conn, host, address, key, note: null, fresh: true, uses: 0, state: 'busy', idleTimer: undefined, localAddress: null,
    tls: { encrypted: false, problem: 'starttls-not-supported', detail: '', chain: [] },
    ended: new Promise((resolve) => (ended = resolve)),
  };
  return new Promise((resolve, reject) => {
    let settled = false;
    const fail = (error: Error) => {
      if (settled) return;
      settled = true;
      clearDeadline();
      reject(error);
    };
    const clearDeadline = setupDeadline(conn, options.connectTimeoutMs, fail);
    // SMTPConnection emits 'error' for the whole of its life; without a listener it would throw.
    conn.on('error', (error) => {
      // Handshake failures surface as socket errors; the upgrade in progress says what they were.
      if (conn.upgrading) Object.assign(error, { duringTls: true });
      fail(error);
    });
    conn.once('end', () => {
      ended();
      fail(new Error('connection closed during setup'));
    });
    conn.connect((error) => {
      if (settled) return;
      if (error) {
        conn.close();
        fail(error);
      } else {
        settled = true;
        clearDeadline();
        const socket = (conn as unknown as { _socket: TLSSocket | net.Socket })._socket;
        lease.localAddress = socket.localAddress ?? null;
        lease.tls = judgeTls(conn.secure ? (socket as TLSSocket) : null, host);
        resolve(lease);
      }
    });
  });
}

export class ConnectionPool {
  readonly #slots = new Map<string, HostSlot>();
  readonly #options: ConnectOptions;
  readonly #max: number;
  readonly #idleMs: number;
  #closed = false;

  readonly #messagesPerConnection: (host: string) => number;
  /** Refused sessions' verdicts by `<requirement key> <address>`, when refused and until when they stand (monotonic ms). */
  readonly #refused = new Map<string, { verdict: TlsVerdict; at: number; until: number }>();
  readonly #refusalMemoryMs: number;
  readonly #monotonicNow: () => number;
  readonly #log: SessionLog | null;

  constructor(
    options: ConnectOptions, maxPerHost: number, idleMs: number, messagesPerConnection: (host: string) => number = () => Infinity,
    refusals: { memoryMs?: number; monotonicNow?: () => number } = {}, log?: SessionLog,
  ) {
    this.#options = options;
    this.#log = log ?? null;
    this.#messagesPerConnection = messagesPerConnection;
    this.#refusalMemoryMs = refusals.memoryMs ?? REFUSAL_MEMORY_MS;
    this.#monotonicNow = refusals.monotonicNow ?? (() => performance.now());
    this.#max = maxPerHost;
    this.#idleMs = idleMs;
  }

  #slot(key: string): HostSlot {
    let slot = this.#slots.get(key);
    if (!slot) this.#slots.set(key, (slot = { idle: [], open: 0, releasing: 0, waiters: [] }));
    return slot;
  }

  #dropIfUnused(key: string, slot: HostSlot): void {
    if (slot.open === 0 && slot.releasing === 0 && slot.idle.length === 0 && slot.waiters.length === 0 && this.#slots.get(key) === slot) {
      this.#slots.delete(key);
    }
  }

  /** A live connection to `host`: an idle one that answers RSET, or a new one to one of `addresses`. */
  async acquire(host: string, addresses: string[], budget: { attempts: number }, requirement: SessionRequirement): Promise<Lease> {
    for (;;) {
      if (this.#closed) throw new Error('mx transport is closed');
      // Looked up on every turn: a woken waiter is no longer in its slot, which may have been
      // dropped (and another made for the key) before it runs.
      const slot = this.#slot(requirement.key);
      const idle = slot.idle.pop();
      if (idle) {
        clearTimeout(idle.idleTimer);
        idle.state = 'busy';
        idle.fresh = false;
        const failure = await reset(idle, this.#options.commandTimeoutMs);
        if (failure === null) return idle;
        // The failure may quote the server's reply: a field, never the message.
        this.#log?.warn({ host, address: idle.address, reason: peerTextForLog(failure) }, `mx: a pooled connection to ${host} [${idle.address}] failed RSET and was closed`);
        this.discard(idle);
        continue;
      }
      // A connection on its way back from a transaction is waited for rather than another
      // opened, but by one acquire each: with every returning one spoken for (each waiter
      // takes one), a burst opens connections up to the limit instead of queueing behind them.
      // Each release that makes one idle wakes one waiter.
      if (slot.releasing <= slot.waiters.length && slot.open < this.#max) {
        slot.open++;
        try {
          return await this.#open(host, addresses, budget, requirement);
        } catch (error) {
          slot.open--;
          slot.waiters.shift()?.();
          this.#dropIfUnused(requirement.key, slot);
          throw error;
        }
      }
      await new Promise<void>((resolve) => slot.waiters.push(resolve));
    }
  }

  async #open(host: string, addresses: string[], budget: { attempts: number }, requirement: SessionRequirement): Promise<Lease> {
    let lastError: Error = new Error(`no address to connect to for ${host}`);
    // The latest address that refused with a reply: its codes go with whichever failure ends the attempt.
    let replied: SetupFailed | null = null;
    const refusals: SessionRefused[] = [];
    const refuse = (address: string, verdict: TlsVerdict, detail: string) => {
      this.#remember(requirement.key, address, verdict);
      const refused = new SessionRefused(`${host} [${address}]: ${detail}`, verdict, address);
      refusals.push(refused);
      return refused;
    };
    for (const address of addresses) {
      if (budget.attempts <= 0) break;
      const remembered = this.#rememberedRefusal(requirement, host, address);
      if (remembered) {
        lastError = remembered;
        continue;
      }
      budget.attempts--;
      let lease: Lease;
      try {
        lease = await connect(this.#options, host, address, requirement.key, true);
      } catch (caught) {
        const error = asNodemailerError(caught);
        const tlsFailed = (error as { duringTls?: boolean }).duringTls === true || isTlsFailure(error);
        if (!tlsFailed) {
          lastError = new Error(`${host} [${address}]: ${error.message}`);
          const reply = setupReplyOf(error);
          if (reply) replied = new SetupFailed(lastError.message, reply);
          continue;
        }
        if (requirement.required) {
          const verdict: TlsVerdict = { encrypted: false, problem: 'validation-failure', detail: `TLS handshake failed: ${error.message}`, chain: [] };
          lastError = refuse(address, verdict, requirement.accept(verdict, host) ?? verdict.detail);
          continue;
        }
        try {
          lease = await connect(this.#options, host, address, requirement.key, false);
          lease.note = `sent without TLS: STARTTLS failed (${error.message})`;
        } catch (plainCaught) {
          const plainError = asNodemailerError(plainCaught);
          lastError = new Error(`${host} [${address}]: ${plainError.message}`);
          const reply = setupReplyOf(plainError);
          if (reply) replied = new SetupFailed(lastError.message, reply);
          continue;
        }
      }
      const refusal = requirement.accept(lease.tls, host);
      if (refusal !== null && requirement.required) {
        // Nothing of the message was sent: the session is closed before MAIL FROM.
        quit(lease);
        lastError = refuse(address, lease.tls, refusal);
        continue;
      }
      lease.ended.then(() => {
        // The server may close an idle connection; a busy one is settled by its transaction.
        if (lease.state === 'idle') this.discard(lease);
      });
      return lease;
    }
    const failed = lastError instanceof SessionRefused
      ? (replied ? lastError.after(replied) : lastError)
      : new SetupFailed(lastError.message, replied?.reply ?? null);
    failed.refusals = refusals;
    throw failed;
  }

  #remember(key: string, address: string, verdict: TlsVerdict): void {
    const now = this.#monotonicNow();
    // Expired entries go as new ones come, so the map holds at most a period's refusals.
    for (const [k, entry] of this.#refused) if (entry.until <= now) this.#refused.delete(k);
    this.#refused.set(`${key} ${address}`, { verdict, at: now, until: now + this.#refusalMemoryMs });
  }

  /** The refusal standing for this address under this requirement, judged again for the caller's policy. */
  #rememberedRefusal(requirement: SessionRequirement, host: string, address: string): SessionRefused | null {
    if (!requirement.required) return null;
    const entry = this.#refused.get(`${requirement.key} ${address}`);
    if (!entry) return null;
    const now = this.#monotonicNow();
    if (entry.until <= now) {
      this.#refused.delete(`${requirement.key} ${address}`);
      return null;
    }
    const refusal = requirement.accept(entry.verdict, host);
    if (refusal === null) return null;
    const wallNow = Date.now();
    const time = (ms: number) => new Date(wallNow + (ms - now)).toISOString().slice(0, 19) + 'Z';
    return new SessionRefused(`${host} [${address}]: ${refusal} (a session at ${time(entry.at)}; not tried again before ${time(entry.until)})`, entry.verdict, address, true);
  }

  release(lease: Lease, reusable: boolean): void {
    if (lease.state !== 'busy') return;
    lease.uses++;
    if (!reusable || lease.uses >= this.#messagesPerConnection(lease.host)) {
      this.discard(lease);
      return;
    }
    lease.state = 'releasing';
    const slot = this.#slot(lease.key);
    slot.releasing++;
    afterPendingReplies(() => {
      slot.releasing--;
      if (lease.state !== 'releasing') {
        // Discarded on its way back: this count may have been all that kept its slot.
        this.#dropIfUnused(lease.key, slot);
        return;
      }
      if (this.#closed || lease.conn.destroyed) {
        this.discard(lease);
        return;
      }
      lease.state = 'idle';
      slot.idle.push(lease);
      lease.idleTimer = setTimeout(() => this.discard(lease), this.#idleMs);
      slot.waiters.shift()?.();
    });
  }

  discard(lease: Lease): void {
    if (lease.state === 'gone') return;
    const slot = this.#slot(lease.key);
    const at = slot.idle.indexOf(lease);
    if (at >= 0) slot.idle.splice(at, 1);
    lease.state = 'gone';
    clearTimeout(lease.idleTimer);
    slot.open--;
    quit(lease);
    slot.waiters.shift()?.();
    this.#dropIfUnused(lease.key, slot);
  }

  async close(): Promise<void> {
    this.#closed = true;
    const leases = [...this.#slots.values()].flatMap((slot) => [...slot.idle]);
    for (const lease of leases) this.discard(lease);
    for (const slot of this.#slots.values()) for (const wake of slot.waiters.splice(0)) wake();
    await Promise.all(leases.map((lease) => lease.ended));
  }
}
