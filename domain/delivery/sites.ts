// Sites: recipient domains grouped by the MX hosts that serve them (every domain a mailbox
// provider hosts shares its MX set, so one site), each with limits an operator can set per MX
// host pattern, and an adaptive rate that a throttling reply lowers and successes restore.
// Pure rules; apps/services/delivery/sites.ts keeps each site's state and applies them.

export interface SiteLimits {
  /** Transactions (and so connections) to the site at once, per sender process. */
  connections: number;
  /** Transactions on one connection before it is closed and another opened. */
  messagesPerConnection: number;
  /** Messages per minute to the site, per sender process: the most the adaptive rate reaches. */
  messagesPerMinute: number;
}

/**
 * Conservative: what a new sending IP can expect large providers to take without deferring it,
 * low enough not to look like a burst, high enough for transactional volume.
 */
export const DEFAULT_SITE_LIMITS: SiteLimits = { connections: 5, messagesPerConnection: 100, messagesPerMinute: 600 };

export interface ShapingRule {
  /** `mx.example.com`, or `*.example.com` (any host under example.com). */
  pattern: string;
  limits: Partial<SiteLimits>;
  line: number;
}

export class ShapingFileError extends Error {
  readonly line: number;
  constructor(line: number, message: string) {
    super(`line ${line}: ${message}`);
    this.name = 'ShapingFileError';
    this.line = line;
  }
}

const SETTINGS: Record<string, keyof SiteLimits> = {
  connections: 'connections',
  messages_per_connection: 'messagesPerConnection',
  messages_per_minute: 'messagesPerMinute',
};
const MAXIMA: Record<keyof SiteLimits, number> = { connections: 1000, messagesPerConnection: 100_000, messagesPerMinute: 1_000_000 };
const PATTERN = /^(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/;

/**
 * RELAY_SHAPING_FILE: one rule per line, `<mx host pattern> setting=value ...`, `#` comments.
 * Settings: connections, messages_per_connection, messages_per_minute (whole numbers ≥ 1).
 * The first rule whose pattern matches one of a site's MX hosts applies.
 */
export function parseShapingFile(text: string): ShapingRule[] {
  const rules: ShapingRule[] = [];
  text.split(/\r?\n/).forEach((raw, i) => {
    const line = i + 1;
    const content = raw.replace(/#.*$/, '').trim();
    if (!content) return;
    const [patternText, ...settings] = content.split(/\s+/);
    const pattern = patternText.toLowerCase().replace(/\.$/, '');
    if (!PATTERN.test(pattern)) throw new ShapingFileError(line, `"${patternText}" is not an MX host name or *.domain pattern`);
    if (settings.length === 0) throw new ShapingFileError(line, `"${patternText}" sets nothing (connections=, messages_per_connection=, messages_per_minute=)`);
    const limits: Partial<SiteLimits> = {};
    for (const setting of settings) {
      const [name, value, ...extra] = setting.split('=');
      const key = SETTINGS[name];
      if (!key || value === undefined || extra.length > 0) {
        throw new ShapingFileError(line, `"${setting}" is not a setting (connections=N, messages_per_connection=N, messages_per_minute=N)`);
      }
      if (!/^\d+$/.test(value) || Number(value) < 1 || Number(value) > MAXIMA[key]) {
        throw new ShapingFileError(line, `${name} must be a whole number from 1 to ${MAXIMA[key]}, got "${value}"`);
      }
      limits[key] = Number(value);
    }
    rules.push({ pattern, limits, line });
  });
  return rules;
}

export function hostMatches(host: string, pattern: string): boolean {
  const name = host.toLowerCase().replace(/\.$/, '');
  return pattern.startsWith('*.') ? name.endsWith(pattern.slice(1)) && name.length > pattern.length - 1 : name === pattern;
}

/** The rule that applies to a site: the first whose pattern matches one of its MX hosts. */
export function ruleFor(mxHosts: string[], rules: ShapingRule[]): ShapingRule | undefined {
  return rules.find((r) => mxHosts.some((host) => hostMatches(host, r.pattern)));
}

export function limitsFor(mxHosts: string[], rules: ShapingRule[]): SiteLimits {
  return { ...DEFAULT_SITE_LIMITS, ...ruleFor(mxHosts, rules)?.limits };
}

export interface MxHost {
  host: string;
  preference: number;
}

/**
 * MX hosts a site's key names at most: as many as the MX transport considers for one domain
 * (MAX_MX_HOSTS_PER_DOMAIN, infra/mail/mx-transport.ts). The MX set is whatever a recipient
 * domain's DNS answers (hundreds of long names fit one answer over TCP), and the key is kept per
 * site and written into every site snapshot: a key naming the whole set would make its memory
 * the answer's size, for every site.
 */
export const SITE_KEY_HOSTS = 10;

/**
 * A site's key: the SITE_KEY_HOSTS most preferred of its MX hosts (ties by name, so that one set
 * always gives one key), sorted by name. A domain without MX records is its own site.
 */
export function siteKeyOf(mxHosts: MxHost[]): string {
  const preferences = new Map<string, number>();
  for (const { host, preference } of mxHosts) {
    const name = host.toLowerCase().replace(/\.$/, '');
    preferences.set(name, Math.min(preference, preferences.get(name) ?? preference));
  }
  const byPreference = [...preferences].sort(([a, pa], [b, pb]) => pa - pb || (a < b ? -1 : a > b ? 1 : 0));
  return byPreference.slice(0, SITE_KEY_HOSTS).map(([name]) => name).sort().join(',');
}

export interface Reply {
  smtpCode: number | null;
  enhancedCode: string | null;
  response: string;
}

/**
 * Words by which a receiver says the sender's traffic to it, as a whole, is too much: a rate,
 * a count of messages or connections, load ("server busy", Microsoft's 451 4.7.500 for an IP it
 * does not know yet), Postfix's client limits (anvil(8): "450 4.7.1 Error: too much mail from
 * <address>", "421 4.7.0 <host>: Error: too many connection requests from <address>", "… too
 * many new TLS sessions from …"). Not "try (again) later" alone: every temporary reply means that, and the
 * usual greylisting texts say it (Exim's default "451 Temporary local problem - please try
 * later", OpenBSD spamd's "451 Temporary failure, please try again later").
 */
const RATE_WORDS = /\b(rate.?limit(ed|ing)?|too many (messages|connections|connection requests|concurrent|recipients|new TLS sessions)|too much mail from|slow down|throttl\w*|temporarily (deferred|rate)|exceeded .{0,40}(rate|limit)|(sending|send|connection) rate|unusual rate|(server|system|service) (is )?(too |currently )?busy|too busy)\b/i;

/**
 * Greylisting (RFC 6647): the receiver defers the first try of each sender/recipient/client IP
 * triplet it has not seen, whatever the rate, so a site that greylists each new correspondent
 * would otherwise be paused and slowed once per new recipient. Postgrey's "450 4.2.0 <rcpt>:
 * Recipient address rejected: Greylisted, see http://postgrey.schweikert.ch/help/<domain>.html",
 * milter-greylist's "451 4.7.1 Greylisting in action, please come back in 00:05:00", greylistd's
 * Exim ACL "451 <ip> is not yet authorized to deliver mail from <sender> to <rcpt>. Please try
 * later." The words win over a code that would otherwise count (421, 4.7.28): the reply names
 * its reason.
 */
const GREYLISTING = /gr[ae]y[ -]?list|not yet authori[sz]ed to deliver mail/i;

/**
 * Whether a reply tells the sender to slow down; with the wait it names, if any. A temporary
 * reply that is not greylisting counts when it is 421 (the receiver closes the session: busy,
 * or the IP's limit reached, as Gmail's "421 4.7.0 Try again later, closing connection"), has
 * 4.7.28 (Gmail's "... has been temporarily rate limited"), or says so in RATE_WORDS. Other
 * temporary replies concern one message or recipient (a full mailbox, Gmail's "450 4.2.1 The
 * user you are trying to contact is receiving mail at a rate that ...", a policy check, a
 * local fault) and leave the site as it is: its message is retried on its own schedule.
 */
export function throttleOf(reply: Reply): { throttled: boolean; hintMs: number | null } {
  const temporary = reply.smtpCode !== null ? reply.smtpCode >= 400 && reply.smtpCode < 500 : /^4\./.test(reply.enhancedCode ?? '');
  const throttled = temporary && !GREYLISTING.test(reply.response)
    && (reply.smtpCode === 421 || /^4\.7\.28$/.test(reply.enhancedCode ?? '') || RATE_WORDS.test(reply.response));
  if (!throttled) return { throttled: false, hintMs: null };
  const hint = /\b(?:in|after|for|wait)\s+(\d{1,5})\s*(s|sec|secs|seconds?|m|min|mins|minutes?|h|hours?)\b/i.exec(reply.response);
  if (!hint) return { throttled: true, hintMs: null };
  const unit = hint[2].toLowerCase();
  const factor = unit.startsWith('h') ? 3_600_000 : unit.startsWith('m') ? 60_000 : 1000;
  return { throttled: true, hintMs: Math.min(Number(hint[1]) * factor, 6 * 3_600_000) };
}

export interface SiteState {
  /** Messages per minute allowed now (adaptive, at most the limit). */
  rate: number;
  /** No new transaction before this time (ms, on the clock `now` is read from); 0: not paused. */
  pausedUntil: number;
  /** The next pause's length when throttled again (grows with repeated throttling). */
  backoffMs: number;
  /** Successes since the last change of rate. */
  successes: number;
  throttles: number;
  /** The latest replies that throttled, newest first (at most RECENT_REPLIES). */
  recent: string[];
}

const MIN_BACKOFF_MS = 5_000;
const MAX_BACKOFF_MS = 30 * 60_000;
/** The rate never goes below a hundredth of the limit (at least 1 a minute): a throttled site is still tried. */
const minRate = (limits: SiteLimits) => Math.max(1, Math.ceil(limits.messagesPerMinute / 100));
/** Successes in a row that raise the rate one step. */
const SUCCESSES_PER_STEP = 10;
const RECENT_REPLIES = 5;

export const initialSiteState = (limits: SiteLimits): SiteState => ({ rate: limits.messagesPerMinute, pausedUntil: 0, backoffMs: MIN_BACKOFF_MS, successes: 0, throttles: 0, recent: [] });

/**
 * A throttling reply: the rate halves, and the site pauses for the current backoff (or the
 * wait the reply names, if longer), which doubles for the next time, up to MAX_BACKOFF_MS.
 * While paused, further throttling replies (from transactions already under way) count once.
 */
export function afterThrottle(state: SiteState, limits: SiteLimits, reply: string, hintMs: number | null, now: number): SiteState {
  const recent = [reply.slice(0, 200), ...state.recent].slice(0, RECENT_REPLIES);
  if (state.pausedUntil > now) return { ...state, throttles: state.throttles + 1, recent };
  const pause = Math.max(state.backoffMs, hintMs ?? 0);
  return {
    rate: Math.max(minRate(limits), Math.floor(state.rate / 2)),
    pausedUntil: now + pause,
    backoffMs: Math.min(MAX_BACKOFF_MS, pause * 2),
    successes: 0,
    throttles: state.throttles + 1,
    recent,
  };
}

/**
 * A success: the next backoff halves (a site that throttles now and then is not paused longer
 * each time), and every SUCCESSES_PER_STEP in a row raise the rate by a quarter, up to the limit.
 */
export function afterSuccess(state: SiteState, limits: SiteLimits): SiteState {
  const successes = state.successes + 1;
  const backoffMs = Math.max(MIN_BACKOFF_MS, Math.floor(state.backoffMs / 2));
  if (successes < SUCCESSES_PER_STEP) return { ...state, successes, backoffMs };
  return { ...state, rate: Math.min(limits.messagesPerMinute, Math.max(state.rate + 1, Math.ceil(state.rate * 1.25))), backoffMs, successes: 0 };
}
