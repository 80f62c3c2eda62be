// GET /v1/projects/:projectId/stats: the query and the answer (apps/services/deliverability-stats.ts).
import { Type } from '@sinclair/typebox';
import { LATENCIES, OUTCOMES } from '../../../projections/deliverability.ts';
import { Id } from './management-schemas.ts';

export const StatsParams = Type.Object({ projectId: Id });

export const StatsQuery = Type.Object({
  from: Type.Optional(Type.String({ format: 'date-time', description: 'Start (inclusive), rounded down to the period. Default: `to` minus 24 hours.' })),
  to: Type.Optional(Type.String({ format: 'date-time', description: 'End (exclusive), rounded up to the period. Default: now.' })),
  granularity: Type.Optional(Type.Union([Type.Literal('hour'), Type.Literal('day')], { description: 'Default: hour for ranges up to 3 days, day beyond. Hours cover at most 31 days, days at most 400.' })),
  groupBy: Type.Optional(Type.Union([Type.Literal('sending_domain'), Type.Literal('recipient_domain')], { description: 'One series point per period and domain.' })),
}, { additionalProperties: false });

const Counts = Object.fromEntries(OUTCOMES.map((o) => [o, Type.Integer({ minimum: 0, description: `Recipients (To, CC) that reached ${o} in the period.` })]));

const SeriesPoint = Type.Object({
  period: Type.String({ format: 'date-time' }),
  group: Type.Optional(Type.String()),
  ...Counts,
});

const Histogram = Type.Object({
  buckets: Type.Array(Type.Object({ le_ms: Type.Union([Type.Integer(), Type.Null()]), count: Type.Integer({ minimum: 0 }) })),
  count: Type.Integer({ minimum: 0 }),
  p50_ms: Type.Union([Type.Integer(), Type.Null()]),
  p90_ms: Type.Union([Type.Integer(), Type.Null()]),
  p99_ms: Type.Union([Type.Integer(), Type.Null()]),
});

export const ProjectStatsResponse = Type.Object({
  project_id: Type.String(),
  from: Type.String({ format: 'date-time' }),
  to: Type.String({ format: 'date-time' }),
  granularity: Type.Union([Type.Literal('hour'), Type.Literal('day')]),
  group_by: Type.Union([Type.Literal('sending_domain'), Type.Literal('recipient_domain'), Type.Null()]),
  series: Type.Array(SeriesPoint, { description: 'Without groupBy, every period of the range in order; with it, the (period, domain) pairs that counted something.' }),
  totals: Type.Object({
    ...Counts,
    bounce_rate: Type.Union([Type.Number(), Type.Null()], { description: 'hard_bounced / bounce_rate_base; null when the base is 0.' }),
    bounce_rate_base: Type.Integer({ minimum: 0, description: 'The recipients sent or hard_bounced in the range, each once.' }),
    complaint_rate: Type.Union([Type.Number(), Type.Null()], { description: 'complained / complaint_rate_base; null when the base is 0.' }),
    complaint_rate_base: Type.Integer({ minimum: 0, description: 'The recipients sent, delivered or complained in the range, each once.' }),
  }),
  thresholds: Type.Object(Object.fromEntries((['bounce_rate', 'complaint_rate'] as const).map((name) => [name, Type.Object({
    warning: Type.Number(), risk: Type.Number(),
    level: Type.Union([Type.Literal('ok'), Type.Literal('warning'), Type.Literal('risk'), Type.Null()], { description: 'Where the rate stands: ok below warning, risk from risk; null without a rate.' }),
  })])), { description: 'Bounce rate: warning from 5 %, risk from 10 % (as large sending services review accounts); complaint rate: warning from 0.1 %, risk from 0.3 % (what large mailbox providers publish for bulk senders).' }),
  latency: Type.Object(Object.fromEntries(LATENCIES.map((l) => [l, Histogram]))),
  recipient_domains: Type.Array(Type.Object({
    domain: Type.String(),
    failures: Type.Integer({ minimum: 0 }),
    hard_bounced: Type.Integer({ minimum: 0 }),
    soft_bounced: Type.Integer({ minimum: 0 }),
    rejected: Type.Integer({ minimum: 0 }),
    failed: Type.Integer({ minimum: 0 }),
    top_reply: Type.Union([Type.Object({ code: Type.String(), text: Type.String(), count: Type.Integer({ minimum: 1 }) }), Type.Null()]),
  }), { description: 'Recipient domains with failures, most first (at most 50), with their most common reply.' }),
});
