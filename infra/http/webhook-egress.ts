// Outbound HTTPS for webhooks, built so that a customer-supplied URL cannot be turned against
// Relay's own network (SSRF):
// - the URL rules (webhook-url.ts) are applied again before every attempt;
// - the name is resolved once, and every A and AAAA answer must be a global address
//   (address-ranges.ts): a name that mixes public and private answers is refused outright,
//   since which answer a later lookup picks is up to whoever runs its DNS;
// - the connection goes to that checked address, given as an IP literal so that no second
//   lookup can happen (DNS rebinding), while TLS SNI and certificate verification use the name;
// - redirects are never followed (a 3xx is a failed attempt, retried on the schedule like any
//   other non-2xx), responses are read only up to a cap, and every attempt is bounded in time.
// A destination in the allow list (RELAY_WEBHOOK_ALLOW, development only) skips the range check
// and is resolved as any program on the machine would (getaddrinfo: /etc/hosts, then DNS), so
// https://localhost:8443/ reaches a receiver on the developer's machine.
// Refusal messages name the range, never the address: they reach API clients, and the
// address an internal name resolves to is not theirs to learn.
import { lookup, Resolver } from 'node:dns/promises';
import https from 'node:https';
import type { IncomingMessage } from 'node:http';
import net from 'node:net';
import type { LookupFunction } from 'node:net';
import { classifyAddress } from './address-ranges.ts';
import { checkWebhookUrl, isAllowed } from './webhook-url.ts';
import type { AttemptResult, DestinationCheck, HttpEgress, WebhookErrorCode, WebhookPost } from '../ports/http-egress.ts';

export type { AttemptResult, WebhookErrorCode, WebhookPost };

export interface DestinationOptions {
  /** `host[:port]` resolvers; empty: the system's (/etc/resolv.conf). */
  dnsServers: string[];
  /** `host:port` destinations exempt from the range check, resolved by the system too (RELAY_WEBHOOK_ALLOW). */
  allow: ReadonlySet<string>;
  port: number;
  /** Cancels the lookups; the result is then a dns_failure. */
  signal?: AbortSignal;
}

export type Destination =
  | { ok: true; address: string; family: 4 | 6 }
  | { ok: false; errorCode: 'unsafe_destination' | 'dns_failure'; message: string };

export const DEFAULT_USER_AGENT = 'Relay-Webhooks/1.0';

// Per try; c-ares makes `tries` attempts per server. The attempt's total limit bounds it anyway.
const DNS_TIMEOUT_MS = 2000;
const DNS_TRIES = 2;

type Answers = { ok: true; addresses: { address: string; family: 4 | 6 }[] } | { ok: false; message: string };

/** An IP literal's address (IPv6 without its brackets); null for a name. */
function literalAddress(host: string): { address: string; family: 4 | 6 } | null {
  const address = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  const family = net.isIP(address);
  return family === 0 ? null : { address, family: family as 4 | 6 };
}

/** The system's answer (getaddrinfo: /etc/hosts, then the system's DNS), for allowed destinations only. */
async function systemLookup(host: string, signal: AbortSignal | undefined): Promise<Answers> {
  const cancelled = (): Answers => ({ ok: false, message: `Resolving ${host} was cancelled.` });
  if (signal?.aborted) return cancelled();
  // getaddrinfo cannot be cancelled: the attempt stops waiting for it instead.
  let onAbort = () => {};
  const aborted = new Promise<Answers>((resolve) => signal?.addEventListener('abort', (onAbort = () => resolve(cancelled())), { once: true }));
  try {
    return await Promise.race([aborted, systemAnswers(host)]);
  } finally {
    signal?.removeEventListener('abort', onAbort);
  }
}

async function systemAnswers(host: string): Promise<Answers> {
  try {
    const answers = await lookup(host, { all: true, order: 'ipv4first' });
    const addresses = answers.filter((a) => a.family === 4 || a.family === 6).map((a) => ({ address: a.address, family: a.family as 4 | 6 }));
    return addresses.length > 0 ? { ok: true, addresses } : { ok: false, message: `${host} has no address on this machine.` };
  } catch (error) {
    return { ok: false, message: `${host} could not be resolved on this machine (${(error as NodeJS.ErrnoException).code ?? 'UNKNOWN'}).` };
  }
}

async function lookupAll(host: string, dnsServers: string[], signal: AbortSignal | undefined): Promise<Answers & { missing?: boolean }> {
  const literal = literalAddress(host);
  if (literal) return { ok: true, addresses: [literal] };
  const resolver = new Resolver({ timeout: DNS_TIMEOUT_MS, tries: DNS_TRIES });
  if (dnsServers.length > 0) {
    try {
      resolver.setServers(dnsServers);
    } catch (error) {
      return { ok: false, message: `The DNS server list is invalid: ${(error as Error).message}.` };
    }
  }
  const cancel = () => resolver.cancel();
  if (signal?.aborted) return { ok: false, message: `Resolving ${host} was cancelled.` };
  signal?.addEventListener('abort', cancel, { once: true });
  try {
    const settle = (work: Promise<string[]>) => work.then((addresses) => ({ addresses, code: null }), (error: NodeJS.ErrnoException) => ({ addresses: [] as string[], code: error.code ?? 'UNKNOWN' }));
    const [v4, v6] = await Promise.all([settle(resolver.resolve4(host)), settle(resolver.resolve6(host))]);
    // NXDOMAIN is ENOTFOUND and an empty answer ENODATA; anything else means the answer is
    // unknown, and a partial answer could hide a private address, so the lookup fails.
    const failure = [v4.code, v6.code].find((code) => code !== null && code !== 'ENOTFOUND' && code !== 'ENODATA');
    if (failure) return { ok: false, message: `${host} could not be resolved (${failure}).` };
    const addresses = [...v4.addresses.map((address) => ({ address, family: 4 as const })), ...v6.addresses.map((address) => ({ address, family: 6 as const }))];
    if (addresses.length === 0) {
      return { ok: false, missing: true, message: v4.code === 'ENOTFOUND' ? `${host} does not exist in DNS.` : `${host} has no A or AAAA record.` };
    }
    return { ok: true, addresses };
  } finally {
    signal?.removeEventListener('abort', cancel);
  }
}

/**
 * Resolves `host` (A and AAAA) and picks the address to connect to: the first IPv4 answer,
 * else the first IPv6 one. Every answer must be global unless `host:port` is in `allow`.
 */
export async function resolveDestination(host: string, options: DestinationOptions): Promise<Destination> {
  const allowed = isAllowed(options.allow, host, options.port);
  // An allowed destination is the developer's own: with no resolvers configured the system's
  // lookup answers alone; with some (tests' DNS servers), a name they do not know falls back to it.
  let answers: Answers & { missing?: boolean } = allowed && options.dnsServers.length === 0 && !literalAddress(host)
    ? await systemLookup(host, options.signal)
    : await lookupAll(host, options.dnsServers, options.signal);
  if (allowed && !answers.ok && answers.missing && !options.signal?.aborted) answers = await systemLookup(host, options.signal);
  if (!answers.ok) return { ok: false, errorCode: 'dns_failure', message: answers.message };
  if (!allowed) {
    for (const { address } of answers.addresses) {
      const { global, range, cidr } = classifyAddress(address);
      if (!global) {
        return {
          ok: false,
          errorCode: 'unsafe_destination',
          message: `${host} resolves to an address in ${range}${cidr ? ` (${cidr})` : ''}; webhooks are only delivered to public addresses.`,
        };
      }
    }
  }
  return { ok: true, ...answers.addresses[0] };
}

/** For endpoint creation and updates: the same rule as an attempt, without connecting. */
export async function checkResolvesPublic(
  host: string,
  options: Omit<DestinationOptions, 'port'> & { port?: number },
): Promise<DestinationCheck> {
  const destination = await resolveDestination(host, { ...options, port: options.port ?? 443 });
  return destination.ok ? { ok: true } : destination;
}

const TLS_CODE = /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_SELF_SIGNED_CERT$|SELF_SIGNED_CERT_IN_CHAIN$|INVALID_CA$|INVALID_PURPOSE$|PATH_LENGTH_EXCEEDED$|HOSTNAME_MISMATCH$|ERROR_IN_CERT_|EPROTO$)/;

function errorCodeOf(error: unknown): WebhookErrorCode {
  for (let e = error as (NodeJS.ErrnoException & { cause?: unknown }) | undefined, depth = 0; e && depth < 5; e = e.cause as typeof e, depth++) {
    const code = typeof e.code === 'string' ? e.code : '';
    if (code === 'ECONNREFUSED') return 'connection_refused';
    if (code === 'ECONNRESET' || code === 'EPIPE') return 'connection_reset';
    if (code === 'ETIMEDOUT') return 'timeout';
    if (TLS_CODE.test(code) || /SSL routines|certificate/i.test(e.message ?? '')) return 'tls_error';
  }
  return 'network_error';
}

function outcomeOf(status: number): WebhookErrorCode | null {
  if (status >= 200 && status < 300) return null;
  if (status >= 300 && status < 400) return 'redirect';
  return 'http_error';
}

// Set by Relay whatever the caller passed: they must agree with the connection made here.
const OWNED_HEADERS = new Set(['host', 'content-length', 'transfer-encoding', 'connection']);

function requestHeaders(caller: Record<string, string>, host: string, port: number, length: number): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(caller)) if (!OWNED_HEADERS.has(name.toLowerCase())) headers[name] = value;
  if (!Object.keys(headers).some((name) => name.toLowerCase() === 'user-agent')) headers['User-Agent'] = DEFAULT_USER_AGENT;
  headers.Host = port === 443 ? host : `${host}:${port}`;
  headers['Content-Length'] = String(length);
  return headers;
}

/**
 * The connection already targets an IP literal, so Node does not look anything up; should
 * any layer ask anyway, it gets the checked address and nothing else.
 */
function pinnedLookup(address: string, family: 4 | 6): LookupFunction {
  return (_hostname, options, callback) => {
    if (options?.all) callback(null, [{ address, family }]);
    else callback(null, address, family);
  };
}

interface Exchange {
  url: URL;
  host: string;
  port: number;
  address: string;
  family: 4 | 6;
  post: WebhookPost;
  connectTimeoutMs: number;
  maxResponseBytes: number;
  deadline: AbortSignal;
}

function exchange(x: Exchange): Promise<Omit<AttemptResult, 'durationMs'>> {
  return new Promise((resolve) => {
    let settled = false;
    let status: number | null = null;
    const decoder = new TextDecoder('utf-8');
    let snippet = '';
    let received = 0;

    const req = https.request({
      host: x.address,
      family: x.family,
      port: x.port,
      // SNI carries names only; for an allowed IP literal the certificate is checked against the address.
      servername: literalAddress(x.host) ? '' : x.host,
      lookup: pinnedLookup(x.address, x.family),
      method: 'POST',
      path: `${x.url.pathname}${x.url.search}`,
      headers: requestHeaders(x.post.headers, x.host, x.port, x.post.body.length),
      ca: x.post.ca,
      // Explicit, so NODE_TLS_REJECT_UNAUTHORIZED=0 in the environment cannot turn checks off.
      rejectUnauthorized: true,
      // A fresh connection per attempt, closed after it: nothing pooled can outlive the check.
      agent: false,
    });

    const finish = (errorCode: WebhookErrorCode | null): void => {
      if (settled) return;
      settled = true;
      clearTimeout(connectTimer);
      x.deadline.removeEventListener('abort', onDeadline);
      req.destroy();
      resolve({ httpStatus: status, errorCode, responseSnippet: snippet === '' ? null : snippet });
    };
    // Once the status line is in, it is the outcome; the body is only a diagnostic, so a
    // body cut short by the cap, a reset or the deadline does not change it.
    const finishWithStatus = () => finish(outcomeOf(status as number));
    const onDeadline = () => (status === null ? finish('timeout') : finishWithStatus());
    const connectTimer = setTimeout(() => finish('timeout'), x.connectTimeoutMs);
    x.deadline.addEventListener('abort', onDeadline, { once: true });

    req.once('socket', (socket) => socket.once('secureConnect', () => clearTimeout(connectTimer)));
    req.on('error', (error) => (status === null ? finish(errorCodeOf(error)) : finishWithStatus()));
    req.on('response', (res: IncomingMessage) => {
      status = res.statusCode ?? null;
      if (status === null) return finish('network_error');
      res.on('data', (chunk: Buffer) => {
        const take = chunk.subarray(0, Math.max(0, x.maxResponseBytes - received));
        received += take.length;
        // stream: a character cut at the cap is dropped rather than turned into U+FFFD.
        snippet += decoder.decode(take, { stream: true });
        if (received >= x.maxResponseBytes) finishWithStatus();
      });
      res.on('end', finishWithStatus);
      res.on('error', finishWithStatus);
      res.on('close', finishWithStatus);
    });
    if (x.deadline.aborted) return onDeadline();
    req.end(x.post.body);
  });
}

/**
 * One delivery attempt. Never throws for an outcome: every failure is an errorCode. The
 * caller signs the body and sets its headers; `User-Agent` defaults to Relay-Webhooks/1.0.
 */
export async function postWebhook(post: WebhookPost): Promise<AttemptResult> {
  const started = performance.now();
  const done = (result: Omit<AttemptResult, 'durationMs'>): AttemptResult => ({ ...result, durationMs: Math.round(performance.now() - started) });
  const refused = (errorCode: WebhookErrorCode) => done({ httpStatus: null, errorCode, responseSnippet: null });
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(), post.totalTimeoutMs ?? 15_000);
  try {
    const checked = checkWebhookUrl(String(post.url), { allow: post.allow });
    if (!checked.ok) return refused('unsafe_destination');
    const destination = await resolveDestination(checked.host, { dnsServers: post.dnsServers, allow: post.allow, port: checked.port, signal: deadline.signal });
    if (deadline.signal.aborted) return refused('timeout');
    if (!destination.ok) return refused(destination.errorCode);
    return done(
      await exchange({
        url: checked.url,
        host: checked.host,
        port: checked.port,
        address: destination.address,
        family: destination.family,
        post,
        connectTimeoutMs: post.connectTimeoutMs ?? 5_000,
        maxResponseBytes: post.maxResponseBytes ?? 64 * 1024,
        deadline: deadline.signal,
      }),
    );
  } finally {
    clearTimeout(timer);
  }
}

/** The HTTP egress port (infra/ports/http-egress.ts) as this module implements it. */
export const webhookEgress: HttpEgress = {
  post: postWebhook,
  checkDestination: (host, options) => checkResolvesPublic(host, options),
};
