// Request-rate limits of the send endpoint (spec: Limits) and of template previews, and the
// window arithmetic they need. Pure: the shared counters live in apps/services/rate-limits.ts.
import type { Environment } from './management.ts';

export type RatePolicyName = 'dev-key' | 'key' | 'workspace' | 'preview';

export interface RatePolicy {
  name: RatePolicyName;
  /** Accepted requests per window. */
  limit: number;
  windowMs: number;
  /**
   * 'first-request': a window opens with the first accepted request after the previous one
   * ended (development keys). 'clock': windows are aligned to the clock (whole seconds).
   */
  start: 'first-request' | 'clock';
}

export const DEV_KEY_RATE: RatePolicy = { name: 'dev-key', limit: 15, windowMs: 60_000, start: 'first-request' };
export const PRODUCTION_KEY_RATE: RatePolicy = { name: 'key', limit: 100, windowMs: 1_000, start: 'clock' };
export const WORKSPACE_RATE: RatePolicy = { name: 'workspace', limit: 200, windowMs: 1_000, start: 'clock' };

/**
 * Template previews per dashboard session: each compiles and renders a template (MJML
 * included) on the template thread, so one session must not be able to keep that thread busy.
 * A preview on every pause in typing stays well within it.
 */
export const PREVIEW_RATE: RatePolicy = { name: 'preview', limit: 30, windowMs: 10_000, start: 'clock' };

/** The policies one send is counted against: its key's, then its workspace's. */
export const ratePoliciesFor = (environment: Environment): RatePolicy[] =>
  [environment === 'development' ? DEV_KEY_RATE : PRODUCTION_KEY_RATE, WORKSPACE_RATE];

export interface RateWindow {
  /** Identifies the window among the scope's windows; part of every slot's id. */
  key: string;
  startMs: number;
  endMs: number;
}

/** The clock-aligned window that holds `nowMs`. */
export function clockWindowAt(policy: RatePolicy, nowMs: number): RateWindow {
  const startMs = Math.floor(nowMs / policy.windowMs) * policy.windowMs;
  return { key: String(startMs), startMs, endMs: startMs + policy.windowMs };
}

/**
 * A first-request window: the `seq`-th of its scope, opened at `startMs`. The start time is
 * part of the key so that a window opened again under a reused number never shares slots.
 */
export function openedWindow(policy: RatePolicy, seq: number, startMs: number): RateWindow {
  return { key: `${seq}@${startMs}`, startMs, endMs: startMs + policy.windowMs };
}

/**
 * How far before a window's start a clock may read and still be in it: API processes' clocks
 * differ by a little (no NTP is perfect), and a process a little behind the one that opened a
 * window must count its requests in it, not open another.
 */
export const CLOCK_SKEW_TOLERANCE_MS = 10_000;

/**
 * A window counts requests from its start (less the skew tolerance) until its end. A clock set
 * back further than that (an NTP step, a VM resumed) is before the window: the scope's next
 * window opens then, rather than the key being held to a window that would otherwise "run" until
 * the clock caught up with its end.
 */
export const windowRuns = (window: Pick<RateWindow, 'startMs' | 'endMs'>, nowMs: number): boolean =>
  window.startMs - CLOCK_SKEW_TOLERANCE_MS <= nowMs && nowMs < window.endMs;

/** Milliseconds until the window ends, never more than its length (a clock a little behind its start). */
const leftMs = (window: Pick<RateWindow, 'startMs' | 'endMs'>, nowMs: number): number =>
  Math.min(window.endMs - window.startMs, window.endMs - nowMs);

/** Whole seconds until the window ends, at least 1 and at most its length: what Retry-After says. */
export const retryAfterSeconds = (window: Pick<RateWindow, 'startMs' | 'endMs'>, nowMs: number): number =>
  Math.max(1, Math.ceil(leftMs(window, nowMs) / 1000));

/** Whole seconds until the window ends (0 when it just did), at most its length: the `t` of the RateLimit header. */
export const resetSeconds = (window: Pick<RateWindow, 'startMs' | 'endMs'>, nowMs: number): number =>
  Math.max(0, Math.ceil(leftMs(window, nowMs) / 1000));

export interface RateStanding {
  policy: RatePolicy;
  /** Requests still allowed in the current window. */
  remaining: number;
  /** Seconds until the window resets. */
  reset: number;
}

/**
 * The IETF draft's structured-field headers (draft-ietf-httpapi-ratelimit-headers):
 * `RateLimit-Policy: "dev-key";q=15;w=60` and `RateLimit: "dev-key";r=14;t=60`.
 */
export function rateLimitHeaders(standings: RateStanding[]): { 'ratelimit-policy': string; ratelimit: string } {
  return {
    'ratelimit-policy': standings.map((s) => `"${s.policy.name}";q=${s.policy.limit};w=${Math.round(s.policy.windowMs / 1000)}`).join(', '),
    ratelimit: standings.map((s) => `"${s.policy.name}";r=${Math.max(0, s.remaining)};t=${s.reset}`).join(', '),
  };
}

export const rateLimitedMessage = (seconds: number): string =>
  `rate limit exceeded: retry in ${seconds} ${seconds === 1 ? 'second' : 'seconds'}`;
