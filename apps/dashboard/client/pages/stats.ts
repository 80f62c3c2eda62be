// A project's deliverability: the series as a chart (SVG the server renders from the same
// figures), the bounce and complaint rates against their thresholds, the totals, latencies and
// the recipient domains that fail most. The range is in the address (?range=24h|7d|30d).
import { get, withQuery } from '../api.ts';
import type { PageContext, RateDefinition } from '../context.ts';
import { badge, facts, field, h, section, select, table } from '../dom.ts';

interface Threshold { warning: number; risk: number; level: 'ok' | 'warning' | 'risk' | null }
interface Histogram { count: number; p50_ms: number | null; p90_ms: number | null; p99_ms: number | null }
interface FailingDomain {
  domain: string; failures: number; hard_bounced: number; soft_bounced: number; rejected: number; failed: number;
  top_reply: { code: string; text: string; count: number } | null;
}
interface Stats {
  from: string; to: string; granularity: 'hour' | 'day';
  totals: Record<string, number | null> & { bounce_rate: number | null; complaint_rate: number | null };
  thresholds: { bounce_rate: Threshold; complaint_rate: Threshold };
  latency: { accepted_to_sent: Histogram; sent_to_delivered: Histogram };
  recipient_domains: FailingDomain[];
}

const RANGES: Array<[value: string, label: string, hours: number]> = [
  ['24h', 'Last 24 hours', 24],
  ['7d', 'Last 7 days', 24 * 7],
  ['30d', 'Last 30 days', 24 * 30],
];

const percent = (rate: number) => `${(rate * 100).toFixed(rate < 0.01 ? 2 : 1)} %`;
const duration = (ms: number | null) => (ms === null ? '—' : ms < 1000 ? `≤ ${ms} ms` : ms < 60_000 ? `≤ ${ms / 1000} s` : ms < 3_600_000 ? `≤ ${ms / 60_000} min` : `≤ ${ms / 3_600_000} h`);

const SVG = 'http://www.w3.org/2000/svg';
const svg = (tag: string, attrs: Record<string, string | number>, text?: string): SVGElement => {
  const element = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) element.setAttribute(name, String(value));
  if (text !== undefined) element.textContent = text;
  return element;
};

/** The thresholds marked under the meter, where they fall on its scale (drawn, not styled: the policy allows no style attribute). */
function scale(threshold: Threshold): SVGElement {
  const max = threshold.risk * 1.5;
  const at = (value: number) => `${((value / max) * 100).toFixed(2)}%`;
  const marks = svg('svg', { class: 'rate-scale', width: '100%', height: 22, 'aria-hidden': 'true', focusable: 'false' });
  for (const [name, value, color] of [['warning', threshold.warning, '#9a6700'], ['risk', threshold.risk, '#cf222e']] as const) {
    marks.append(svg('line', { x1: at(value), x2: at(value), y1: 0, y2: 8, stroke: color, 'stroke-width': 2 }));
    marks.append(svg('text', { x: at(value), y: 20, 'text-anchor': 'middle', 'font-size': 11, fill: color }, `${name} ${percent(value)}`));
  }
  return marks;
}

/** "sent, delivered or complained", from the outcomes' names. */
function outcomes(names: readonly string[]): string {
  const words = names.map((name) => name.replace(/_/g, ' '));
  return words.length < 2 ? words.join('') : `${words.slice(0, -1).join(', ')} or ${words[words.length - 1]}`;
}

/** A rate on a meter whose low and high marks are its warning and risk thresholds, explained from its definition (settings.rates). */
function rate(label: string, value: number | null, threshold: Threshold, definition: RateDefinition): HTMLElement {
  const id = `rate-${label.toLowerCase().replace(/\W+/g, '-')}`;
  const level = threshold.level ?? 'none';
  const meter = h('meter', {
    id, min: 0, max: threshold.risk * 1.5, low: threshold.warning, high: threshold.risk, optimum: 0, value: value ?? 0,
    'aria-describedby': `${id}-says`,
  });
  return h('div', { class: `rate rate-${level}` },
    h('label', { for: id }, label),
    h('p', { class: 'rate-value' }, value === null ? `no recipient ${outcomes(definition.base)} yet` : percent(value), ' ',
      threshold.level ? badge(threshold.level === 'ok' ? 'ok' : threshold.level === 'warning' ? 'warning' : 'at risk', threshold.level === 'ok' ? 'ok' : threshold.level === 'warning' ? 'delayed' : 'failed') : null),
    meter,
    scale(threshold),
    h('p', { class: 'hint', id: `${id}-says` }, `Warning from ${percent(threshold.warning)}, risk from ${percent(threshold.risk)} (${label.toLowerCase()}: the recipients ${outcomes([definition.counts])} among those ${outcomes(definition.base)}).`));
}

export async function render(ctx: PageContext): Promise<void> {
  ctx.title('Stats');
  const projectId = ctx.project!.id;
  const here = `/projects/${projectId}/stats`;
  const chosen = RANGES.find(([value]) => value === ctx.query.get('range')) ?? RANGES[0];
  const to = new Date();
  const from = new Date(to.getTime() - chosen[2] * 3_600_000);
  const query = { from: from.toISOString(), to: to.toISOString(), granularity: chosen[2] <= 72 ? 'hour' : 'day' };
  const stats = await get<Stats>(withQuery(`/v1/projects/${projectId}/stats`, query));

  const picker = h('form', { class: 'filters', method: 'get', action: here, 'aria-label': 'Choose the range' },
    field('Range', select('range', RANGES.map(([value, label]): [string, string] => [value, label]), chosen[0])),
    h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Show')));

  const totals = stats.totals;
  const chart = h('figure', { class: 'chart' },
    h('img', {
      src: withQuery(`/v1/projects/${projectId}/stats/chart.svg`, query),
      alt: `Recipients per ${stats.granularity}: sent ${totals.sent}, delivered ${totals.delivered}, bounced ${Number(totals.hard_bounced) + Number(totals.soft_bounced)}, complained ${totals.complained}, failed or rejected ${Number(totals.failed) + Number(totals.rejected)}.`,
      width: 960, height: 320,
    }),
    h('figcaption', { class: 'hint' }, `${chosen[1]}, per ${stats.granularity} (UTC). Recipients (To and CC) as they reached each outcome.`));

  const rates = h('div', { class: 'rates' },
    rate('Bounce rate', stats.totals.bounce_rate, stats.thresholds.bounce_rate, ctx.settings.rates.bounce_rate),
    rate('Complaint rate', stats.totals.complaint_rate, stats.thresholds.complaint_rate, ctx.settings.rates.complaint_rate));

  const outcomeFacts = facts([
    ['Accepted', String(totals.accepted)], ['Suppressed', String(totals.suppressed)], ['Sent', String(totals.sent)],
    ['Delivered', String(totals.delivered)], ['Delayed', String(totals.delayed)], ['Hard bounced', String(totals.hard_bounced)],
    ['Soft bounced', String(totals.soft_bounced)], ['Complained', String(totals.complained)], ['Rejected', String(totals.rejected)], ['Failed', String(totals.failed)],
    ['Accepted → sent', `p50 ${duration(stats.latency.accepted_to_sent.p50_ms)}, p99 ${duration(stats.latency.accepted_to_sent.p99_ms)}`],
    ['Sent → delivered', `p50 ${duration(stats.latency.sent_to_delivered.p50_ms)}, p99 ${duration(stats.latency.sent_to_delivered.p99_ms)}`],
  ]);

  const failures = table('Recipient domains by failures',
    ['Recipient domain', 'Failures', 'Hard bounced', 'Soft bounced', 'Rejected', 'Failed', 'Most common reply'],
    stats.recipient_domains.map((d) => [
      d.domain, String(d.failures), String(d.hard_bounced), String(d.soft_bounced), String(d.rejected), String(d.failed),
      d.top_reply ? h('span', null, h('code', null, d.top_reply.code || '—'), ` ×${d.top_reply.count} `, h('span', { class: 'hint' }, d.top_reply.text)) : '—',
    ]),
    'No recipient domain failed in this range.');

  ctx.main.append(picker,
    section('Rates', rates),
    section('Over time', chart),
    section('Totals', outcomeFacts),
    section('Failing recipient domains', failures));
}
