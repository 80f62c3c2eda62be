// The sender's sites (domain/delivery/sites.ts applied): which site a recipient domain belongs
// to (its MX host set, looked up through the MX transport's DNS cache), each site's limits
// (RELAY_SHAPING_FILE, else the defaults), and its adaptive state: the rate now, a pause after
// throttling, a token bucket that spaces messages at that rate. Per sender process, as an
// MTA's shaping is per node; a snapshot of every site is written to the `sites` collection
// every few seconds for `relay sites` and /metrics (siteSeries: a bounded few of them by name).
//
// Spacing and pauses are durations, kept in monotonic time: a wall clock stepped back (an NTP
// correction, a VM resumed) must not put a site's next slot, and with it every queued message
// for the site, off by the size of the step. Wall times appear only where they leave the
// registry: the time take() names for a refused slot (the work item's next due time) and the
// snapshots' pause ends.
import { hostname } from 'node:os';
import {
  afterSuccess, afterThrottle, initialSiteState, limitsFor, ruleFor, siteKeyOf, throttleOf,
  type MxHost, type Reply, type ShapingRule, type SiteLimits, type SiteState,
} from '../../../domain/delivery/sites.ts';
import type { DnsCache } from '../../../infra/dns/dns-cache.ts';
import type { DocumentStore } from '../../../infra/ports/document-store.ts';
import type { MailTransport, OutgoingMessage, SendOptions, TransportOutcome } from '../../../infra/ports/mail-transport.ts';
import { COLLECTIONS } from '../collections.ts';

export interface SiteSnapshot {
  _id: string;
  site: string;
  instance: string;
  limits: SiteLimits;
  rate: number;
  pausedUntil: string | null;
  throttles: number;
  delivered: number;
  deferred: number;
  inFlight: number;
  recent: string[];
  updatedAt: string;
  /**
   * The RELAY_SHAPING_FILE pattern whose rule sets the site's limits; null: the defaults.
   * Optional, as is recentVolume: an older sender's snapshots lack both.
   */
  rule?: string | null;
  /** Transactions recorded for the site, each counting less with age (halved every VOLUME_HALF_LIFE_MS), as of updatedAt. */
  recentVolume?: number;
}

interface Site {
  key: string;
  limits: SiteLimits;
  rule: string | null;
  state: SiteState;
  /** When the next message may start, in monotonic ms (the token bucket, one token at a time). */
  nextSlotAt: number;
  delivered: number;
  deferred: number;
  inFlight: number;
  /** recentVolume as of volumeAt (monotonic ms). */
  volume: number;
  volumeAt: number;
}

export interface SiteRegistryOptions {
  /** The MX transport's cache; null: every domain is its own site. */
  dns: DnsCache | null;
  /**
   * Default true. False (outbox, smarthost): no site limits, spacing or backoff, and no sites
   * to show. The next hop there is Relay's provider, which shapes traffic to each receiver
   * itself; a recipient domain's share of the sender is then only the sender's concurrency.
   */
  shaping?: boolean;
  rules: ShapingRule[];
  /** The wall clock (epoch ms) of the times the registry hands out. Default Date.now. */
  now?: () => number;
  /** The monotonic clock (ms) of spacing and pauses. Default performance.now. */
  monotonicNow?: () => number;
  /** Tests only: a factor on pauses and on the spacing of messages (RELAY_DELIVERY_RETRY_SCALE). */
  scale?: number;
  /**
   * Sites kept at most (the least recently used that are neither paused nor busy go). Default
   * 10,000.
   */
  maxSites?: number;
}

const INSTANCE = `${hostname()}:${process.pid}`;
const MAX_DOMAINS = 100_000;
/**
 * The domain map's size in characters (each domain's name and its site's key), at most. Keys are
 * shared by a site's domains, but a key's string outlives its site while a domain names it:
 * domains on many sites with long keys would otherwise keep a key each.
 */
const MAX_DOMAIN_CHARS = 32 * 1024 * 1024;
/**
 * Sites looked at, at most, to find one to forget when a new site comes: with every site paused
 * or busy, a new one costs this many steps (and the registry grows) rather than a scan of all.
 */
const EVICTION_LOOKS = 64;
/**
 * Site lookups (lookUp) under way at once, at most: however many new recipient domains a look
 * at the schedule finds, its DNS work is bounded, and the rest are looked up on later looks.
 */
export const MAX_LOOKUPS = 16;

/** A recipient domain whose site a workspace's due mail waits for. */
export interface WantedLookup {
  domain: string;
  workspace: string;
}

/** How fast a site's recent volume forgets: a transaction this long ago counts half. */
export const VOLUME_HALF_LIFE_MS = 10 * 60_000;
const decayed = (volume: number, elapsedMs: number) => volume * 2 ** (-Math.max(0, elapsedMs) / VOLUME_HALF_LIFE_MS);

export class SiteRegistry {
  readonly #dns: DnsCache | null;
  readonly #rules: ShapingRule[];
  readonly #now: () => number;
  readonly #monotonicNow: () => number;
  readonly #scale: number;
  readonly #maxSites: number;
  readonly #shaping: boolean;
  readonly #sites = new Map<string, Site>();
  /** Recipient domain → site key (the site's own string, not a copy), as last looked up. */
  readonly #domains = new Map<string, string>();
  /** The characters of #domains' names and keys. */
  #domainChars = 0;
  /** Domains whose lookUp is under way. */
  readonly #lookingUp = new Set<string>();
  /** Lookups under way per workspace (none: absent). */
  readonly #lookupsOf = new Map<string, number>();

  constructor(options: SiteRegistryOptions) {
    this.#dns = options.dns;
    this.#rules = options.rules;
    this.#now = options.now ?? Date.now;
    this.#monotonicNow = options.monotonicNow ?? (() => performance.now());
    this.#scale = options.scale ?? 1;
    this.#maxSites = options.maxSites ?? 10_000;
    this.#shaping = options.shaping ?? true;
  }

  /** Whether sites shape traffic (limits, spacing, backoff); false: every domain is a site of its own, without limits. */
  get shaping(): boolean {
    return this.#shaping;
  }

  /** The site a domain belongs to, as far as known now (before its first lookup: the domain itself). */
  keyOf(domain: string): string {
    return this.#domains.get(domain.toLowerCase()) ?? domain.toLowerCase();
  }

  /**
   * The site a domain belongs to when it is known: looked up before, or no lookup needed
   * (without shaping every domain is its own). Null before its first lookup, when keyOf would
   * answer the domain itself, which is not its site's key when the domain shares an MX set.
   */
  knownKeyOf(domain: string): string | null {
    const name = domain.toLowerCase();
    if (!this.#shaping) return name;
    return this.#domains.get(name) ?? null;
  }

  /** Whether the domain's lookUp is under way. */
  lookingUp(domain: string): boolean {
    return this.#lookingUp.has(domain.toLowerCase());
  }

  /**
   * Looks the wanted domains' sites up in the background (resolve), as many as MAX_LOOKUPS
   * leaves room for; `looked` is called as each is known. The room goes by workspace turns, the
   * lookups under way counted: every workspace's first wanted domain before any workspace's
   * second, so that one workspace's many new domains (a list imported from a CRM) do not spend
   * every lookup while another's one email waits. Within a workspace, and between workspaces
   * on the same turn, in the order given. A domain already being looked up, or past the room, is
   * left for a later call.
   */
  lookUp(wanted: readonly WantedLookup[], looked: () => void): void {
    if (this.#lookingUp.size >= MAX_LOOKUPS) return;
    const seen = new Set<string>();
    const turnsTaken = new Map<string, number>();
    const queued: Array<{ name: string; workspace: string; turn: number }> = [];
    for (const { domain, workspace } of wanted) {
      const name = domain.toLowerCase();
      if (seen.has(name) || this.#lookingUp.has(name)) continue;
      seen.add(name);
      const turn = turnsTaken.get(workspace) ?? this.#lookupsOf.get(workspace) ?? 0;
      turnsTaken.set(workspace, turn + 1);
      queued.push({ name, workspace, turn });
    }
    // Stable: the given order decides within a turn.
    queued.sort((a, b) => a.turn - b.turn);
    for (const { name, workspace } of queued) {
      if (this.#lookingUp.size >= MAX_LOOKUPS) return;
      this.#lookingUp.add(name);
      this.#lookupsOf.set(workspace, (this.#lookupsOf.get(workspace) ?? 0) + 1);
      // resolve() does not throw: a failed lookup makes the domain its own site.
      void this.resolve(name).finally(() => {
        this.#lookingUp.delete(name);
        const left = (this.#lookupsOf.get(workspace) ?? 1) - 1;
        if (left > 0) this.#lookupsOf.set(workspace, left);
        else this.#lookupsOf.delete(workspace);
        looked();
      });
    }
  }

  /** The site a domain belongs to, looking its MX set up (through the cache) when needed. */
  async resolve(domain: string): Promise<string> {
    const name = domain.toLowerCase();
    if (!this.#shaping) return name;
    let hosts: MxHost[] = [{ host: name, preference: 0 }];
    if (this.#dns) {
      try {
        const found = await this.#dns.mx(name);
        const named = found.kind === 'answer' ? found.records.filter((r) => r.exchange) : [];
        if (named.length > 0) hosts = named.map((r) => ({ host: r.exchange, preference: r.priority }));
      } catch {
        // The transport will say what failed; meanwhile the domain is its own site.
      }
    }
    const { key } = this.#site(siteKeyOf(hosts));
    this.#remember(name, key);
    return key;
  }

  #remember(domain: string, key: string): void {
    const previous = this.#domains.get(domain);
    if (previous !== undefined) {
      this.#domains.delete(domain);
      this.#domainChars -= domain.length + previous.length;
    }
    this.#domains.set(domain, key);
    this.#domainChars += domain.length + key.length;
    while (this.#domains.size > MAX_DOMAINS || this.#domainChars > MAX_DOMAIN_CHARS) {
      const [oldest, oldestKey] = this.#domains.entries().next().value!;
      this.#domains.delete(oldest);
      this.#domainChars -= oldest.length + oldestKey.length;
    }
  }

  #site(key: string): Site {
    let site = this.#sites.get(key);
    if (site) {
      this.#sites.delete(key);
    } else {
      this.#makeRoom();
      // From the key's hosts, not the whole MX set: a site forgotten and met again by its key
      // alone (take, record) gets the same limits.
      const hosts = key.split(',');
      const limits = limitsFor(hosts, this.#rules);
      site = {
        key, limits, rule: ruleFor(hosts, this.#rules)?.pattern ?? null, state: initialSiteState(limits), nextSlotAt: 0, delivered: 0, deferred: 0, inFlight: 0,
        volume: 0, volumeAt: this.#monotonicNow(),
      };
    }
    this.#sites.set(key, site);
    return site;
  }

  /**
   * Forgets the least recently used sites that hold nothing later transactions depend on, until
   * there is room for one more. A site with transactions in flight is kept past the bound:
   * forgetting it would stop counting them against its connections; the sender's concurrency
   * bounds how many such sites there are. A paused site is kept past the bound too, up to twice
   * it: forgetting its pause would send into the throttle at once; past that the registry's
   * memory comes first. Sites kept go to the recent end, so the next look starts past them.
   */
  #makeRoom(): void {
    const now = this.#monotonicNow();
    for (let looked = 0; this.#sites.size >= this.#maxSites && looked < EVICTION_LOOKS; looked++) {
      const [key, site] = this.#sites.entries().next().value!;
      // size counts this site: kept, it and the new one make size + 1, at most twice the bound.
      const keep = site.inFlight > 0 || (site.state.pausedUntil > now && this.#sites.size < 2 * this.#maxSites);
      this.#sites.delete(key);
      if (keep) this.#sites.set(key, site);
    }
  }

  /** Transactions to the site at once: its share of the sender's concurrency. */
  concurrency(key: string): number {
    if (!this.#shaping) return Number.MAX_SAFE_INTEGER;
    return this.#sites.get(key)?.limits.connections ?? 1;
  }

  /**
   * Takes the site's next slot, or says when (epoch ms) one will be free: a paused site none
   * before its pause ends; otherwise one message per (60 s / rate).
   */
  take(key: string): { ok: true } | { ok: false; retryAt: number } {
    if (!this.#shaping) return { ok: true };
    const site = this.#site(key);
    const now = this.#monotonicNow();
    if (site.state.pausedUntil > now) return { ok: false, retryAt: this.#wallTime(site.state.pausedUntil, now) };
    if (site.nextSlotAt > now) return { ok: false, retryAt: this.#wallTime(site.nextSlotAt, now) };
    site.nextSlotAt = Math.max(now, site.nextSlotAt) + (60_000 / site.state.rate) * this.#scale;
    return { ok: true };
  }

  /** The wall time of a monotonic instant, by the two clocks read now. */
  #wallTime(monotonicMs: number, monotonicNow: number): number {
    return this.#now() + (monotonicMs - monotonicNow);
  }

  /** What one transaction to the site came to. */
  record(key: string, outcome: Reply & { result: string }): void {
    if (!this.#shaping) return;
    const site = this.#site(key);
    const now = this.#monotonicNow();
    const throttle = outcome.result === 'deferred' ? throttleOf(outcome) : { throttled: false, hintMs: null };
    if (throttle.throttled) {
      const scaledHint = throttle.hintMs === null ? null : throttle.hintMs * this.#scale;
      const next = afterThrottle({ ...site.state, backoffMs: site.state.backoffMs * this.#scale }, site.limits, outcome.response, scaledHint, now);
      site.state = { ...next, backoffMs: next.backoffMs / this.#scale };
      site.nextSlotAt = Math.max(site.nextSlotAt, site.state.pausedUntil);
    } else if (outcome.result === 'delivered' || outcome.result === 'accepted') {
      site.state = afterSuccess(site.state, site.limits);
    }
    site.volume = decayed(site.volume, now - site.volumeAt) + 1;
    site.volumeAt = now;
    if (outcome.result === 'deferred') site.deferred++;
    if (outcome.result === 'delivered' || outcome.result === 'accepted') site.delivered++;
  }

  /** Transactions to the site under way now. */
  inFlight(key: string): number {
    return this.#sites.get(key)?.inFlight ?? 0;
  }

  started(key: string): void {
    if (!this.#shaping) return;
    this.#site(key).inFlight++;
  }

  ended(key: string): void {
    const site = this.#sites.get(key);
    if (site) site.inFlight = Math.max(0, site.inFlight - 1);
  }

  snapshot(): SiteSnapshot[] {
    const now = new Date(this.#now()).toISOString();
    const monotonicNow = this.#monotonicNow();
    return [...this.#sites.values()].map((site) => ({
      _id: `${INSTANCE} ${site.key}`,
      site: site.key,
      instance: INSTANCE,
      limits: site.limits,
      rate: site.state.rate,
      pausedUntil: site.state.pausedUntil > monotonicNow ? new Date(this.#wallTime(site.state.pausedUntil, monotonicNow)).toISOString() : null,
      throttles: site.state.throttles,
      delivered: site.delivered,
      deferred: site.deferred,
      inFlight: site.inFlight,
      recent: site.state.recent,
      updatedAt: now,
      rule: site.rule,
      recentVolume: Math.round(decayed(site.volume, monotonicNow - site.volumeAt) * 1000) / 1000,
    }));
  }
}

/** The domain of an address, lowercased; null without one. */
export function domainOf(address: string): string | null {
  const at = address.lastIndexOf('@');
  return at > 0 && at < address.length - 1 ? address.slice(at + 1).toLowerCase() : null;
}

/** A transport that tells the registry what each recipient's transaction came to, by site. */
export function observedBySites(transport: MailTransport, sites: SiteRegistry): MailTransport {
  return {
    name: transport.name,
    capacity: transport.capacity,
    // Read when used: the outbox knows its directory's id once warmed, which may come after this.
    get instance() {
      return transport.instance;
    },
    warm: transport.warm?.bind(transport),
    // Recovery's question about a dead sender's transactions: nothing a site said.
    settle: transport.settle?.bind(transport),
    close: () => transport.close(),
    async send(message: OutgoingMessage, options?: SendOptions): Promise<TransportOutcome> {
      const keys = await Promise.all(message.envelope.recipients.map(async (r) => (domainOf(r) ? sites.resolve(domainOf(r)!) : null)));
      for (const key of keys) if (key) sites.started(key);
      try {
        const outcome = await transport.send(message, options);
        outcome.recipients.forEach((r) => {
          // Not sent at all (the claim was taken over): nothing the site said.
          if (r.stage === 'not_begun') return;
          const domain = domainOf(r.address);
          // The answering host's own reply, not the joined words of hosts passed over before it.
          if (domain) sites.record(sites.keyOf(domain), r.reply === undefined ? r : { ...r, response: r.reply });
        });
        return outcome;
      } finally {
        for (const key of keys) if (key) sites.ended(key);
      }
    },
  };
}

export const siteSnapshots = (documents: DocumentStore) => documents.collection<SiteSnapshot>(COLLECTIONS.sites);

/** Sites with series of their own on /metrics, per sender instance: the busiest by recent volume. */
export const BUSIEST_SITE_SERIES = 20;
/** And those a RELAY_SHAPING_FILE rule applies to, the busiest of them up to this many. */
export const SHAPED_SITE_SERIES = 50;
/** The `site` label of the rest of an instance's sites, together. */
export const OTHER_SITES = 'other';

export interface SiteSeries {
  site: string;
  instance: string;
  rate: number;
  limit: number;
  pausedSeconds: number;
  throttles: number;
}

/**
 * The sites /metrics names, from the snapshots: per instance, the BUSIEST_SITE_SERIES with the
 * most recent volume and up to SHAPED_SITE_SERIES more that a shaping rule applies to; the rest
 * together as OTHER_SITES (rates, limits and throttles summed, the longest pause). A site's key
 * is what its recipient domain's DNS says, or the domain itself when it has no MX, so whoever
 * sends makes sites at will; an instance's `site` label takes at most BUSIEST_SITE_SERIES +
 * SHAPED_SITE_SERIES + 1 values however many sites it meets. The shaped ones are bounded too:
 * an MX set only has to include one host a rule names. `relay sites` lists every site.
 */
export function siteSeries(snapshots: SiteSnapshot[], now: number): SiteSeries[] {
  const byInstance = new Map<string, Array<{ snapshot: SiteSnapshot; volume: number }>>();
  for (const snapshot of snapshots) {
    const volume = decayed(snapshot.recentVolume ?? 0, now - Date.parse(snapshot.updatedAt));
    const list = byInstance.get(snapshot.instance) ?? [];
    list.push({ snapshot, volume: Number.isFinite(volume) ? volume : 0 });
    byInstance.set(snapshot.instance, list);
  }
  const series: SiteSeries[] = [];
  for (const [instance, sites] of byInstance) {
    sites.sort((a, b) => b.volume - a.volume || (a.snapshot.site < b.snapshot.site ? -1 : a.snapshot.site > b.snapshot.site ? 1 : 0));
    let busiest = 0;
    let shaped = 0;
    let other: SiteSeries | null = null;
    for (const { snapshot: s } of sites) {
      const pausedSeconds = s.pausedUntil ? Math.max(0, (Date.parse(s.pausedUntil) - now) / 1000) : 0;
      const busy = s.site !== OTHER_SITES && busiest < BUSIEST_SITE_SERIES;
      const named = !busy && s.site !== OTHER_SITES && !!s.rule && shaped < SHAPED_SITE_SERIES;
      if (busy) busiest++;
      if (named) shaped++;
      if (busy || named) {
        series.push({ site: s.site, instance, rate: s.rate, limit: s.limits.messagesPerMinute, pausedSeconds, throttles: s.throttles });
        continue;
      }
      other ??= { site: OTHER_SITES, instance, rate: 0, limit: 0, pausedSeconds: 0, throttles: 0 };
      other.rate += s.rate;
      other.limit += s.limits.messagesPerMinute;
      other.pausedSeconds = Math.max(other.pausedSeconds, pausedSeconds);
      other.throttles += s.throttles;
    }
    if (other) series.push(other);
  }
  return series;
}

/**
 * Writes the registry's snapshot every `everyMs` (and once more on stop), for `relay sites`. One
 * round at a time: a tick that comes while a round is still being written (many sites, a slow
 * store) is skipped, as the next round writes every site's state then anyway.
 */
export function publishSites(documents: DocumentStore, sites: SiteRegistry, onError: (error: Error) => void, everyMs = 5000): { stop(): Promise<void> } {
  let round: Promise<void> | null = null;
  const writeRound = async () => {
    const collection = siteSnapshots(documents);
    for (const snapshot of sites.snapshot()) {
      const current = await collection.get(snapshot._id);
      if (!current) await collection.insert(snapshot).catch(() => {});
      else await collection.replace(snapshot, current._v);
    }
  };
  const write = (): Promise<void> => {
    round ??= writeRound()
      .catch((error: Error) => onError(new Error(`sites: ${error.message}`, { cause: error })))
      .finally(() => {
        round = null;
      });
    return round;
  };
  const timer = setInterval(() => void write(), everyMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      // The round under way wrote states from before the stop was asked: one more writes the last.
      if (round) await round;
      await write();
    },
  };
}
