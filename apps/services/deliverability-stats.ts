// A project's deliverability stats: the counts per period (UTC hour or day) × sending domain ×
// recipient domain × outcome, the bounce and complaint rates, the latency histograms and the
// recipient domains ranked by failures, summed from the deliverability read model
// (projections/deliverability.ts says why it holds one document per email, not counters).
import { setImmediate } from 'node:timers/promises';
import { FAILURES, LATENCIES, LATENCY_BOUNDS_MS, OUTCOMES, SPAN_BOUNDS_MS, countsOf, latencyBucketOf, type DeliverabilityEmail, type Latency, type Outcome } from '../../projections/deliverability.ts';
import { RATE_DEFINITIONS, RATE_NAMES, RATE_THRESHOLDS, rateLevel, type RateLevel, type RateName } from '../../domain/deliverability/rates.ts';
import type { DocumentStore, IndexSpec, Scalar } from '../../infra/ports/document-store.ts';
import { COLLECTIONS } from './collections.ts';
import { compareText } from '../../domain/text.ts';

export type Granularity = 'hour' | 'day';
export type StatsGroup = 'sending_domain' | 'recipient_domain';

export interface StatsQuery {
  projectId: string;
  /** Rounded out to whole periods. */
  from: Date;
  to: Date;
  granularity: Granularity;
  groupBy: StatsGroup | null;
}

export type OutcomeCounts = Record<Outcome, number>;

export interface SeriesPoint extends OutcomeCounts {
  /** The period's first instant. */
  period: string;
  /** The sending or recipient domain, with groupBy. */
  group?: string;
}

export interface LatencyHistogram {
  /** Per bucket: its inclusive upper bound in milliseconds (null: beyond the last bound) and how many fell in it. */
  buckets: Array<{ le_ms: number | null; count: number }>;
  count: number;
  /** The upper bound of the bucket holding the percentile (null: no sample, or beyond the last bound). */
  p50_ms: number | null;
  p90_ms: number | null;
  p99_ms: number | null;
}

export interface FailingDomain {
  domain: string;
  failures: number;
  hard_bounced: number;
  soft_bounced: number;
  rejected: number;
  failed: number;
  /** Its most common failure reply (by code; the words of its latest occurrence). */
  top_reply: { code: string; text: string; count: number } | null;
}

export interface ProjectStats {
  project_id: string;
  from: string;
  to: string;
  granularity: Granularity;
  group_by: StatsGroup | null;
  /** Every period in order; with group_by, one point per period and group that counted something. */
  series: SeriesPoint[];
  /** Rates: domain/deliverability/rates.ts, over the recipients whose outcomes fell in the range (null with an empty base). */
  totals: OutcomeCounts & {
    /** hard_bounced / recipients sent or hard_bounced. */
    bounce_rate: number | null;
    /** The recipients bounce_rate is over. */
    bounce_rate_base: number;
    /** complained / recipients sent, delivered or complained. */
    complaint_rate: number | null;
    /** The recipients complaint_rate is over. */
    complaint_rate_base: number;
  };
  /** Each rate against its thresholds (domain/deliverability/rates.ts). */
  thresholds: Record<RateName, { warning: number; risk: number; level: RateLevel | null }>;
  latency: Record<Latency, LatencyHistogram>;
  /** Recipient domains with failures, most failures first (at most 50). */
  recipient_domains: FailingDomain[];
}

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;
const periodMs = (granularity: Granularity) => (granularity === 'hour' ? HOUR_MS : DAY_MS);
export const floorTo = (ms: number, granularity: Granularity) => Math.floor(ms / periodMs(granularity)) * periodMs(granularity);
export const ceilTo = (ms: number, granularity: Granularity) => Math.ceil(ms / periodMs(granularity)) * periodMs(granularity);

const zeroCounts = (): OutcomeCounts => Object.fromEntries(OUTCOMES.map((o) => [o, 0])) as OutcomeCounts;
const FAILING_DOMAINS_SHOWN = 50;

function histogram(counts: number[]): LatencyHistogram {
  const count = counts.reduce((a, b) => a + b, 0);
  const bound = (i: number) => (i < LATENCY_BOUNDS_MS.length ? LATENCY_BOUNDS_MS[i] : null);
  const percentile = (q: number): number | null => {
    if (count === 0) return null;
    let seen = 0;
    for (let i = 0; i < counts.length; i++) {
      seen += counts[i];
      if (seen >= q * count) return bound(i);
    }
    return null;
  };
  return {
    buckets: counts.map((c, i) => ({ le_ms: bound(i), count: c })),
    count,
    p50_ms: percentile(0.5),
    p90_ms: percentile(0.9),
    p99_ms: percentile(0.99),
  };
}

const rate = (part: number, whole: number): number | null => (whole === 0 ? null : Math.round((part / whole) * 1e6) / 1e6);

type Summed = Pick<DeliverabilityEmail, 'sendingDomain' | 'recipients'>;

/**
 * Sums emails' contributions within [from, to) (from and to already whole periods), one email at
 * a time, so that a read holds one page of documents, never the range's. Pure.
 */
export function statsSum(query: StatsQuery): { add(email: Summed): void; result(): ProjectStats } {
  const from = query.from.getTime();
  const to = query.to.getTime();
  const inRange = (at: string | undefined) => {
    if (at === undefined) return false;
    const ms = Date.parse(at);
    return ms >= from && ms < to;
  };
  const step = periodMs(query.granularity);
  const series = new Map<string, SeriesPoint>();
  const totals = zeroCounts();
  const bases = Object.fromEntries(RATE_NAMES.map((name) => [name, 0])) as Record<RateName, number>;
  const latency = Object.fromEntries(LATENCIES.map((l) => [l, new Array<number>(LATENCY_BOUNDS_MS.length + 1).fill(0)])) as Record<Latency, number[]>;
  const failing = new Map<string, FailingDomain & { replies: Map<string, { text: string; count: number; latest: string }> }>();
  const point = (periodStart: number, group: string | undefined) => {
    const key = `${periodStart}|${group ?? ''}`;
    let p = series.get(key);
    if (!p) series.set(key, (p = { period: new Date(periodStart).toISOString(), ...(group === undefined ? {} : { group }), ...zeroCounts() }));
    return p;
  };
  if (query.groupBy === null) for (let t = from; t < to; t += step) point(t, undefined);

  function add(email: Summed): void {
    const { contributions, latencies } = countsOf(email);
    for (const c of contributions) {
      if (!inRange(c.at)) continue;
      const at = Date.parse(c.at);
      const group = query.groupBy === 'sending_domain' ? email.sendingDomain : query.groupBy === 'recipient_domain' ? c.recipientDomain : undefined;
      point(floorTo(at, query.granularity), group)[c.outcome]++;
      totals[c.outcome]++;
      if (!(FAILURES as readonly string[]).includes(c.outcome)) continue;
      let domain = failing.get(c.recipientDomain);
      if (!domain) failing.set(c.recipientDomain, (domain = { domain: c.recipientDomain, failures: 0, hard_bounced: 0, soft_bounced: 0, rejected: 0, failed: 0, top_reply: null, replies: new Map() }));
      domain.failures++;
      domain[c.outcome as (typeof FAILURES)[number]]++;
      if (c.reply) {
        const reply = domain.replies.get(c.reply.code) ?? { text: c.reply.text, count: 0, latest: c.at };
        reply.count++;
        if (c.at >= reply.latest) Object.assign(reply, { text: c.reply.text, latest: c.at });
        domain.replies.set(c.reply.code, reply);
      }
    }
    // A recipient is in a rate's base once, whichever of the base's outcomes fell in the range:
    // the counted outcome is one of them, so whatever the range, a rate is at most 1.
    for (const r of email.recipients) {
      for (const name of RATE_NAMES) if (RATE_DEFINITIONS[name].base.some((o) => inRange(r.reached[o]))) bases[name]++;
    }
    for (const l of latencies) if (inRange(l.at)) latency[l.latency][latencyBucketOf(l.ms)]++;
  }

  function result(): ProjectStats {
    const recipientDomains = [...failing.values()]
      .sort((a, b) => b.failures - a.failures || compareText(a.domain, b.domain))
      .slice(0, FAILING_DOMAINS_SHOWN)
      .map(({ replies, ...domain }) => {
        const top = [...replies].sort((a, b) => b[1].count - a[1].count || compareText(a[0], b[0]))[0];
        return { ...domain, top_reply: top ? { code: top[0], text: top[1].text, count: top[1].count } : null };
      });
    const rates = Object.fromEntries(RATE_NAMES.map((name) => [name, rate(totals[RATE_DEFINITIONS[name].counts], bases[name])])) as Record<RateName, number | null>;
    return {
      project_id: query.projectId,
      from: query.from.toISOString(),
      to: query.to.toISOString(),
      granularity: query.granularity,
      group_by: query.groupBy,
      series: [...series.values()].sort((a, b) => compareText(a.period, b.period) || compareText((a.group ?? ''), b.group ?? '')),
      totals: { ...totals, ...rates, bounce_rate_base: bases.bounce_rate, complaint_rate_base: bases.complaint_rate },
      thresholds: Object.fromEntries(RATE_NAMES.map((name) => [name, { ...RATE_THRESHOLDS[name], level: rateLevel(name, rates[name]) }])) as ProjectStats['thresholds'],
      latency: Object.fromEntries(LATENCIES.map((l) => [l, histogram(latency[l])])) as Record<Latency, LatencyHistogram>,
      recipient_domains: recipientDomains,
    };
  }

  return { add, result };
}

const PAGE = 1000;
// _id (which comes back anyway) tells a document met again in a later seek, and places the cursor.
const READ_FIELDS = ['_id', 'sendingDomain', 'recipients'] as const;

/** What range reads seek on: a project's emails by span class, then first instant. */
const RANGE_INDEX: IndexSpec = { name: 'project_span_first', fields: [['projectId', 'asc'], ['span', 'asc'], ['firstAt', 'asc'], ['_id', 'asc']] };
export const DELIVERABILITY_INDEXES: IndexSpec[] = [RANGE_INDEX];

/**
 * The seeks of a range read, one per span class (projections/deliverability.ts): an active email
 * of a bounded class started at most its bound before `from`; the last class, and documents
 * written before classes existed (no `span`: null matches a missing field), have no such bound.
 */
const SEEKS: Array<{ span: number | null; windowMs: number | null }> = [
  ...SPAN_BOUNDS_MS.map((windowMs, span) => ({ span, windowMs })),
  { span: SPAN_BOUNDS_MS.length, windowMs: null },
  { span: null, windowMs: null },
];

/**
 * The emails of a project with something counted in [from, to), read a page at a time, each once.
 * The seeks are separate reads, and the processor moves a document on to a higher class as its
 * outcomes come: one summed in a class already read could be met again in a later one, so the
 * ids yielded are kept for the read (no more than the documents it sums) and skipped when met again.
 */
async function* emailsActiveIn(documents: DocumentStore, projectId: string, from: Date, to: Date) {
  const emails = documents.collection<DeliverabilityEmail>(COLLECTIONS.deliverability);
  const summed = new Set<string>();
  for (const { span, windowMs } of SEEKS) {
    const firstAt = windowMs === null ? { lt: to.toISOString() } : { gte: new Date(from.getTime() - windowMs).toISOString(), lt: to.toISOString() };
    let after: Record<string, Scalar> | undefined;
    for (;;) {
      const page = await emails.find({
        where: { projectId, span, firstAt, lastAt: { gte: from.toISOString() } },
        orderBy: RANGE_INDEX.fields,
        after,
        limit: PAGE,
        fields: [...READ_FIELDS, 'firstAt'],
      });
      for (const email of page) {
        if (summed.has(email._id)) continue;
        summed.add(email._id);
        yield email;
      }
      if (page.length < PAGE) break;
      const last = page[page.length - 1];
      after = { projectId, span, firstAt: last.firstAt, _id: last._id };
      // The embedded store answers each page at once, so without a turn of the event loop between
      // pages a long range (200,000 emails) is read and summed in one stretch: 7 s in which the
      // process served nothing else.
      await setImmediate();
    }
  }
}

export async function projectStats(documents: DocumentStore, query: StatsQuery): Promise<ProjectStats> {
  const from = new Date(floorTo(query.from.getTime(), query.granularity));
  const to = new Date(ceilTo(query.to.getTime(), query.granularity));
  const sum = statsSum({ ...query, from, to });
  for await (const email of emailsActiveIn(documents, query.projectId, from, to)) sum.add(email);
  return sum.result();
}
