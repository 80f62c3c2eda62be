// MTA-STS (RFC 8461): which TLS a recipient domain asks its senders to insist on. The TXT
// record `_mta-sts.<domain>` names the current policy id; the policy itself comes from
// https://mta-sts.<domain>/.well-known/mta-sts.txt and is cached by id until max_age ends.
// The record is read by ./mta-sts-record.ts, once per DNS answer (the DNS cache hands out the
// same answer until its TTL ends, and a message to the domain asks each time). mailauth reads
// the policy file and matches MX names (its RFC 8461 code is kept up by the author of
// nodemailer); the fetch is Relay's own, so that it goes only to a public address (the MX
// egress rule), over a certificate checked against the system's CAs (plus any given), within a
// size and time budget, and to a port tests can move.
//
// A policy that cannot be fetched (or whose record vanished) keeps the cached one until it
// expires (RFC 8461 5.1); with nothing cached the domain is treated as having no policy, and the
// failure is reported (TLS-RPT). A failed fetch is not retried for FETCH_RETRY_MS. Policies are
// also kept in a store (the document store), so that a restart does not open a window in which
// a blocked policy host would let mail go out under no policy.
//
// A cached policy is fetched again, same id or not, once it is older than about a day (RFC 8461
// 3.3 and 10.2): otherwise an attacker who can block the policy host only around the moment a
// long max_age ends gets the domain's mail under no policy. The refresh runs in the background,
// started by a lookup that finds the policy due: the cached policy is in force meanwhile, so
// waiting for the refresh would only add the policy host's delay (up to the fetch's time budget,
// which whoever blocks the host chooses) to mail that already has what it needs; and a policy no
// mail uses is not worth fetching. A refresh that fails leaves the cached policy as it was, is
// reported like any failed fetch, and is not tried again for FETCH_RETRY_MS; one that succeeds
// renews the policy's max_age, in memory and in the store.
//
// A recipient domain's owner writes its policy, and whoever gives an address chooses the domain,
// so what the cache holds is bounded in bytes (an estimate of the heap, as the DNS cache's), the
// least recently used policy going first (one evicted is read again from the store, if any). A
// policy's lines are kept as one string (one string per line costs several times its
// characters) and a policy listing more than MAX_MX_PATTERNS mx patterns is invalid (RFC 8461
// sets no limit; real ones list a few, with wildcards), so that a 64 KiB policy costs about 64 KiB.
// Its mx lines are counted before mailauth reads the policy, whose removal of repeated patterns
// is quadratic in their number.
import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import type { Answer } from 'dns-packet';
import { parsePolicy, validateMx } from 'mailauth/lib/mta-sts.js';
import { txtStrings, type DnsCache, type DnsLookup } from '../dns/dns-cache.ts';
import { DnsQueryError } from '../dns/stub-resolver.ts';
import { classifyAddress } from '../http/address-ranges.ts';
import { dnsIdIdentityError } from './certificate-dns-ids.ts';
import { readStsRecords, type StsRecord } from './mta-sts-record.ts';
import { cutText } from '../../domain/text.ts';

export type MtaStsMode = 'enforce' | 'testing' | 'none';

export interface MtaStsPolicy {
  domain: string;
  id: string;
  mode: MtaStsMode;
  /** The policy's mx patterns, lowercased ("mail.example.com", "*.example.net"). */
  mx: string[];
  maxAge: number;
  /** The policy file's lines, as TLS-RPT's policy-string wants them (RFC 8460 4.4). */
  lines: string[];
  /** Epoch ms: fetched at + max_age. */
  expiresAt: number;
}

/** Why no policy (or only a cached one) could be had, in TLS-RPT's result types (RFC 8460 4.3.2.2). */
export interface PolicyFailure {
  resultType: 'sts-policy-fetch-error' | 'sts-policy-invalid' | 'sts-webpki-invalid';
  detail: string;
}

export interface PolicyLookup {
  policy: MtaStsPolicy | null;
  /** Set when the live policy could not be fetched this time (the cached one, if any, applies). */
  failure?: PolicyFailure;
}

/** Where fetched policies outlive the process (apps/services/mta-sts-policies.ts). */
export interface MtaStsPolicyStore {
  load(domain: string): Promise<MtaStsPolicy | null>;
  save(policy: MtaStsPolicy): Promise<void>;
}

export interface MtaStsOptions {
  dns: DnsCache;
  store?: MtaStsPolicyStore;
  /** Told when the store fails (the policy in memory still applies). */
  onStoreError?: (error: Error) => void;
  /** RELAY_MTA_STS_PORT (tests only): the port policy hosts are asked on. Default 443. */
  port?: number;
  /** Extra CAs trusted for policy hosts, on top of the system's (tests: the test CA). */
  ca?: string | Buffer | Array<string | Buffer>;
  /** Addresses exempt from the public-address rule (RELAY_MX_ALLOW). */
  allowAddresses?: ReadonlySet<string>;
  /** The whole fetch, connection to last byte. Default 60 s (RFC 8461 3.3 suggests a minute at most). */
  fetchTimeoutMs?: number;
  /** Default 64 KiB (RFC 8461 3.3). */
  maxPolicyBytes?: number;
  /** Cached policies kept at most (the least recently used go first). Default 10,000. */
  maxPolicies?: number;
  /** The cached policies' estimated heap at most (the least recently used go first). Default 8 MiB. */
  maxCacheBytes?: number;
  now?: () => number;
}

/** How long a domain whose policy could not be fetched (nothing cached, a new id, or a refresh) is not asked again. */
const FETCH_RETRY_MS = 5 * 60_000;
/** A cached policy this old is fetched again (RFC 8461 3.3: "a suggested refresh frequency is once per day"). */
const REFRESH_AFTER_MS = 86_400_000;
/** RFC 8461 3.2: max_age's "maximum value of 31557600" (a year). */
const MAX_AGE_LIMIT_S = 31_557_600;
/** More mx patterns than this make a policy invalid. */
export const MAX_MX_PATTERNS = 100;
/** A remembered fetch failure's detail, at most (UTF-16 units). */
const MAX_FAILURE_DETAIL = 500;
/** Addresses a failure names: a policy host's DNS may list a thousand. */
const ADDRESSES_NAMED = 3;

const someOf = (addresses: string[]): string => addresses.length <= ADDRESSES_NAMED
  ? addresses.join(', ')
  : `${addresses.slice(0, ADDRESSES_NAMED).join(', ')} and ${addresses.length - ADDRESSES_NAMED} more`;

/** What the cache keeps of a policy: its lines joined by "\n". */
interface CacheEntry extends Omit<MtaStsPolicy, 'lines'> {
  text: string;
  bytes: number;
  /**
   * The policy last handed out, while anything still holds it (a send, TLS report lines waiting
   * to be counted in the store): handed out again rather than its lines split anew, so that
   * those holders share one copy.
   */
  shared: WeakRef<MtaStsPolicy> | null;
}

/** What a TXT answer's records say, each one's character-strings joined (RFC 8461 3.1). */
function stsRecordOf(answer: DnsLookup<Answer>): StsRecord {
  return answer.kind === 'answer' ? readStsRecords(txtStrings(answer.records)) : { kind: 'none' };
}

/** How many lines of a policy file mailauth takes for mx lines ("mx:", any case, blanks around). */
function mxLineCount(lines: readonly string[]): number {
  let count = 0;
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon >= 0 && line.slice(0, colon).trim().toLowerCase() === 'mx') count++;
  }
  return count;
}

/**
 * The policy text for mailauth, its max_age brought down to MAX_AGE_LIMIT_S when it is a
 * larger number. mailauth rejects the whole policy over a max_age above the maximum, and the
 * domain would then have none (its mail going out under no policy, the failure reported as
 * sts-policy-invalid); but a policy host that publishes more than RFC 8461 3.2 allows most
 * likely means "as long as allowed" (the policy is otherwise well formed, and its author asked
 * for it to be kept longer, not less), so it is used, held for the maximum: refusing it would
 * turn a domain's request for MTA-STS into no MTA-STS at all. Only the first max_age line counts,
 * as in mailauth; a value that is not digits is left to mailauth's judgement.
 */
function maxAgeClamped(lines: readonly string[]): string {
  const clamped = [...lines];
  for (const [at, line] of lines.entries()) {
    const colon = line.indexOf(':');
    if (colon < 0 || line.slice(0, colon).trim().toLowerCase() !== 'max_age') continue;
    const value = line.slice(colon + 1).trim();
    if (/^[0-9]+$/.test(value) && Number(value) > MAX_AGE_LIMIT_S) clamped[at] = `max_age: ${MAX_AGE_LIMIT_S}`;
    break;
  }
  return clamped.join('\n');
}

/** A V8 string's heap: a header, and one byte a character (two once any is outside Latin-1). */
const stringBytes = (s: string): number => 24 + s.length * (/[^\x00-\xff]/.test(s) ? 2 : 1);

/** When a policy was fetched (the store keeps its expiry and max_age). */
const fetchedAt = (policy: Pick<MtaStsPolicy, 'expiresAt' | 'maxAge'>): number => policy.expiresAt - policy.maxAge * 1000;

/**
 * Whether a cached policy is due to be fetched again: daily, or at half its max_age when that
 * is shorter (a policy of one day, common, would otherwise expire before any refresh), but not
 * more often than a failed fetch is retried.
 */
function refreshDue(policy: Pick<MtaStsPolicy, 'expiresAt' | 'maxAge'>, now: number): boolean {
  const after = Math.max(FETCH_RETRY_MS, Math.min(REFRESH_AFTER_MS, (policy.maxAge * 1000) / 2));
  return now - fetchedAt(policy) >= after;
}

function cacheEntry(policy: Omit<MtaStsPolicy, 'lines'>, lines: readonly string[]): CacheEntry {
  const { domain, id, mode, mx, maxAge, expiresAt } = policy;
  const text = lines.join('\n');
  // The entry, its map slot and WeakRef, and each mx pattern with its array slot.
  const bytes = 200 + stringBytes(domain) + stringBytes(id) + stringBytes(text) + mx.reduce((sum, pattern) => sum + 8 + stringBytes(pattern), 0);
  return { domain, id, mode, mx, maxAge, expiresAt, text, bytes, shared: null };
}

class FetchError extends Error {
  readonly failure: PolicyFailure;
  constructor(failure: PolicyFailure) {
    super(failure.detail);
    this.failure = failure;
  }
}

/** Whether `host` matches one of the policy's mx patterns (RFC 8461 4.1). */
export function mxMatchesPolicy(host: string, policy: MtaStsPolicy): boolean {
  return validateMx(host, { mode: policy.mode, mx: policy.mx } as never).valid === true;
}

export class MtaStsResolver {
  readonly #dns: DnsCache;
  readonly #store: MtaStsPolicyStore | null;
  readonly #onStoreError: (error: Error) => void;
  readonly #port: number;
  readonly #ca: Array<string | Buffer> | undefined;
  readonly #allow: ReadonlySet<string>;
  readonly #fetchTimeoutMs: number;
  readonly #maxBytes: number;
  readonly #maxPolicies: number;
  readonly #maxCacheBytes: number;
  readonly #now: () => number;
  /** By domain, least recently used first. */
  readonly #cache = new Map<string, CacheEntry>();
  #cacheBytes = 0;
  /** Domains whose fetch failed with nothing cached: not asked again until then. */
  readonly #retryAfter = new Map<string, { at: number; id: string; failure: PolicyFailure }>();
  readonly #running = new Map<string, Promise<PolicyLookup>>();
  /** Domains whose cached policy is being fetched again in the background. */
  readonly #refreshing = new Set<string>();
  /** One failure per `several` record read, so that while the DNS answer stands it is the same failure (counted per session, not per message). */
  readonly #recordFailures = new WeakMap<StsRecord, PolicyFailure>();
  /** The `_mta-sts` record each DNS answer held: an answer the DNS cache hands out again is not read again. */
  readonly #records = new WeakMap<DnsLookup<Answer>, StsRecord>();

  constructor(options: MtaStsOptions) {
    this.#dns = options.dns;
    this.#store = options.store ?? null;
    this.#onStoreError = options.onStoreError ?? (() => {});
    this.#port = options.port ?? 443;
    // Without extra CAs Node's default store is used (it includes NODE_EXTRA_CA_CERTS).
    const extra = options.ca === undefined ? [] : Array.isArray(options.ca) ? options.ca : [options.ca];
    this.#ca = extra.length > 0 ? [...tls.getCACertificates('default'), ...extra] : undefined;
    this.#allow = options.allowAddresses ?? new Set();
    this.#fetchTimeoutMs = options.fetchTimeoutMs ?? 60_000;
    this.#maxBytes = options.maxPolicyBytes ?? 64 * 1024;
    this.#maxPolicies = options.maxPolicies ?? 10_000;
    this.#maxCacheBytes = options.maxCacheBytes ?? 8 * 1024 * 1024;
    this.#now = options.now ?? Date.now;
  }

  /** The policy that applies to mail for `domain` now (null: none), and any failure to fetch it. */
  policyFor(domain: string): Promise<PolicyLookup> {
    const key = domain.toLowerCase();
    const running = this.#running.get(key);
    if (running) return running;
    const lookup = this.#lookup(key).finally(() => this.#running.delete(key));
    this.#running.set(key, lookup);
    return lookup;
  }

  async #lookup(domain: string): Promise<PolicyLookup> {
    const now = this.#now();
    let entry = this.#recall(domain) ?? (await this.#stored(domain));
    if (entry && entry.expiresAt <= now) {
      this.#forget(domain);
      entry = null;
    }
    const cached = entry ? this.#policyOf(entry) : null;
    let record: StsRecord;
    try {
      record = await this.#record(domain);
    } catch (error) {
      // The record could not be read: the cached policy stands.
      return { policy: cached, failure: { resultType: 'sts-policy-fetch-error', detail: `_mta-sts.${domain} TXT: ${(error as Error).message}` } };
    }
    if (record.kind === 'several') {
      let failure = this.#recordFailures.get(record);
      if (!failure) {
        failure = { resultType: 'sts-policy-fetch-error', detail: `_mta-sts.${domain} TXT: ${record.count} records begin with v=STSv1;` };
        this.#recordFailures.set(record, failure);
      }
      return { policy: cached, failure };
    }
    if (record.kind !== 'id') return { policy: cached };
    const { id } = record;
    const retry = this.#retryAfter.get(domain);
    const failed = retry && retry.id === id && retry.at > now ? retry.failure : null;
    if (cached && cached.id === id) {
      // A refresh that failed is said until it is tried again.
      if (failed) return { policy: cached, failure: failed };
      if (refreshDue(cached, now)) this.#refresh(domain, id);
      return { policy: cached };
    }
    if (failed) return { policy: cached, failure: failed };
    try {
      const policy = this.#policyOf(this.#remember(await this.#fetch(domain, id)));
      this.#retryAfter.delete(domain);
      await this.#store?.save(policy).catch((error: Error) => this.#onStoreError(error));
      return { policy };
    } catch (error) {
      return { policy: cached, failure: this.#fetchFailed(domain, id, error, now) };
    }
  }

  /** Remembers a failed fetch of policy `id` for FETCH_RETRY_MS; returns the failure. */
  #fetchFailed(domain: string, id: string, error: unknown, now: number): PolicyFailure {
    const found = error instanceof FetchError ? error.failure : { resultType: 'sts-policy-fetch-error' as const, detail: (error as Error).message };
    // Remembered for up to maxPolicies domains whose owners word their failures: bounded per entry.
    const failure = { ...found, detail: cutText(found.detail, MAX_FAILURE_DETAIL) };
    this.#retryAfter.delete(domain);
    this.#retryAfter.set(domain, { at: now + FETCH_RETRY_MS, id, failure });
    if (this.#retryAfter.size > this.#maxPolicies) this.#retryAfter.delete(this.#retryAfter.keys().next().value!);
    return failure;
  }

  /** Fetches the cached policy `id` of `domain` again, in the background (see the file comment). */
  #refresh(domain: string, id: string): void {
    if (this.#refreshing.has(domain)) return;
    this.#refreshing.add(domain);
    void (async () => {
      const started = this.#now();
      try {
        // Another instance may have refreshed it already: its copy in the store is as good.
        let stored: MtaStsPolicy | null = null;
        try {
          stored = (await this.#store?.load(domain)) ?? null;
        } catch (error) {
          this.#onStoreError(error as Error);
        }
        const fromStore = stored !== null && stored.id === id && !refreshDue(stored, started);
        const entry = fromStore ? cacheEntry(stored!, stored!.lines) : await this.#fetch(domain, id);
        // A lookup that met a new id meanwhile fetched that policy: this one is older.
        const current = this.#cache.get(domain);
        if (current && current.id !== id) return;
        const policy = this.#policyOf(this.#remember(entry));
        this.#retryAfter.delete(domain);
        if (!fromStore) await this.#store?.save(policy).catch((error: Error) => this.#onStoreError(error));
      } catch (error) {
        if ((this.#cache.get(domain)?.id ?? id) === id) this.#fetchFailed(domain, id, error, started);
      } finally {
        this.#refreshing.delete(domain);
      }
    })();
  }

  async #record(domain: string): Promise<StsRecord> {
    const answer = await this.#dns.lookup(`_mta-sts.${domain}`, 'TXT');
    const known = this.#records.get(answer);
    if (known) return known;
    const record = stsRecordOf(answer);
    this.#records.set(answer, record);
    return record;
  }

  /** A policy kept by an earlier process (or another instance), taken into memory. */
  async #stored(domain: string): Promise<CacheEntry | null> {
    if (!this.#store) return null;
    try {
      const policy = await this.#store.load(domain);
      return policy ? this.#remember(cacheEntry(policy, policy.lines)) : null;
    } catch (error) {
      this.#onStoreError(error as Error);
      return null;
    }
  }

  /** The cached entry for `domain`, now the most recently used. */
  #recall(domain: string): CacheEntry | null {
    const entry = this.#cache.get(domain);
    if (!entry) return null;
    this.#cache.delete(domain);
    this.#cache.set(domain, entry);
    return entry;
  }

  #remember(entry: CacheEntry): CacheEntry {
    this.#forget(entry.domain);
    this.#cache.set(entry.domain, entry);
    this.#cacheBytes += entry.bytes;
    for (const domain of this.#cache.keys()) {
      if (this.#cache.size <= this.#maxPolicies && this.#cacheBytes <= this.#maxCacheBytes) break;
      this.#forget(domain);
    }
    return entry;
  }

  #forget(domain: string): void {
    const entry = this.#cache.get(domain);
    if (!entry) return;
    this.#cache.delete(domain);
    this.#cacheBytes -= entry.bytes;
  }

  #policyOf(entry: CacheEntry): MtaStsPolicy {
    const held = entry.shared?.deref();
    if (held) return held;
    const { domain, id, mode, mx, maxAge, expiresAt, text } = entry;
    const policy: MtaStsPolicy = { domain, id, mode, mx, maxAge, lines: text === '' ? [] : text.split('\n'), expiresAt };
    entry.shared = new WeakRef(policy);
    return policy;
  }

  async #address(host: string): Promise<string> {
    const found: string[] = [];
    for (const family of [4, 6] as const) {
      try {
        const answer = await this.#dns.addresses(host, family);
        if (answer.kind === 'answer') found.push(...answer.records);
      } catch (error) {
        if (!(error instanceof DnsQueryError)) throw error;
      }
    }
    if (found.length === 0) throw new FetchError({ resultType: 'sts-policy-fetch-error', detail: `${host} has no address` });
    const usable = found.find((address) => classifyAddress(address).global || this.#allow.has(address.toLowerCase()));
    if (!usable) throw new FetchError({ resultType: 'sts-policy-fetch-error', detail: `${host} resolves only to addresses Relay does not connect to: ${someOf(found)}` });
    return usable;
  }

  async #fetch(domain: string, id: string): Promise<CacheEntry> {
    const host = `mta-sts.${domain}`;
    const url = `https://${host}/.well-known/mta-sts.txt`;
    const address = await this.#address(host);
    const text = (await this.#get(host, address)).toString('utf8');
    const lines = text.split(/\r?\n/);
    const mxLines = mxLineCount(lines);
    if (mxLines > MAX_MX_PATTERNS) {
      throw new FetchError({ resultType: 'sts-policy-invalid', detail: `${url}: ${mxLines} mx patterns, more than the ${MAX_MX_PATTERNS} Relay accepts` });
    }
    let parsed: { mode?: string; mx?: string[]; maxAge?: number };
    try {
      parsed = parsePolicy(maxAgeClamped(lines)) as typeof parsed;
    } catch (error) {
      throw new FetchError({ resultType: 'sts-policy-invalid', detail: `${url}: ${(error as Error).message}` });
    }
    const maxAge = Math.min(parsed.maxAge ?? 0, MAX_AGE_LIMIT_S);
    const policy = { domain, id, mode: parsed.mode as MtaStsMode, mx: (parsed.mx ?? []).map((p) => p.toLowerCase()), maxAge, expiresAt: this.#now() + maxAge * 1000 };
    return cacheEntry(policy, lines.map((l) => l.trim()).filter(Boolean));
  }

  #get(host: string, address: string): Promise<Buffer> {
    const url = `https://${host}/.well-known/mta-sts.txt`;
    return new Promise((resolve, reject) => {
      let settled = false;
      const fail = (failure: PolicyFailure) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        request.destroy();
        reject(new FetchError(failure));
      };
      const request = https.request({
        host: address,
        family: net.isIP(address),
        port: this.#port,
        path: '/.well-known/mta-sts.txt',
        method: 'GET',
        servername: host,
        headers: { host, 'user-agent': 'Relay MTA-STS' },
        ...(this.#ca ? { ca: this.#ca } : {}),
        // The chain is Node's to check (trusted CA, dates); the name is matched against the
        // certificate's DNS-IDs only (./certificate-dns-ids.ts: Node's check also takes the CN
        // and partial wildcards).
        rejectUnauthorized: true,
        checkServerIdentity: (_name, cert) => dnsIdIdentityError(host, cert),
        agent: false,
      }, (response) => {
        // Redirects are not followed (RFC 8461 3.3): only a 200 is a policy.
        if (response.statusCode !== 200) return fail({ resultType: 'sts-policy-fetch-error', detail: `${url}: HTTP ${response.statusCode}` });
        // Only text/plain (RFC 8461 3.3): an HTML page or other content users can place at that
        // path of the policy host must not become a policy, whose mx lines would choose the MX hosts.
        const mediaType = (response.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
        if (mediaType !== 'text/plain') return fail({ resultType: 'sts-policy-invalid', detail: `${url}: served as ${cutText(mediaType, 100) || 'no media type'}, not text/plain` });
        const chunks: Buffer[] = [];
        let size = 0;
        response.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > this.#maxBytes) return fail({ resultType: 'sts-policy-invalid', detail: `${url}: larger than ${this.#maxBytes} bytes` });
          chunks.push(chunk);
        });
        response.on('end', () => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          resolve(Buffer.concat(chunks));
        });
        response.on('error', (error) => fail({ resultType: 'sts-policy-fetch-error', detail: `${url}: ${error.message}` }));
      });
      const timer = setTimeout(() => fail({ resultType: 'sts-policy-fetch-error', detail: `${url}: no policy within ${this.#fetchTimeoutMs} ms` }), this.#fetchTimeoutMs);
      request.on('error', (error: NodeJS.ErrnoException) => {
        const webpki = /CERT|SSL|TLS|UNABLE_TO_|SELF_SIGNED|ALTNAME/.test(error.code ?? '') || /certificate/i.test(error.message);
        fail({ resultType: webpki ? 'sts-webpki-invalid' : 'sts-policy-fetch-error', detail: `${url}: ${error.message}` });
      });
      request.end();
    });
  }
}
