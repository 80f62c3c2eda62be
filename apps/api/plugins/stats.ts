// A project's deliverability stats, for its workspace's members (any role): the figures as JSON,
// and their series as a chart (SVG rendered here) for the dashboard's Stats page.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Static } from '@sinclair/typebox';
import { validationError } from '../../../domain/errors.ts';
import { ceilTo, floorTo, projectStats, type Granularity, type StatsQuery as Query } from '../../services/deliverability-stats.ts';
import { renderStatsChart } from '../../services/stats-chart.ts';
import { requireProjectAccess, requireSession } from '../auth/session.ts';
import type { ApiContext } from '../context.ts';
import { ProjectStatsResponse, StatsParams, StatsQuery } from './stats.schemas.ts';

const DAY_MS = 86_400_000;
const MAX_RANGE_DAYS: Record<Granularity, number> = { hour: 31, day: 400 };

type StatsRequest = FastifyRequest<{ Params: Static<typeof StatsParams>; Querystring: Static<typeof StatsQuery> }>;

// An offset can carry an RFC 3339 date-time out of the four-digit years in UTC, where the answer
// could not write it back as RFC 3339 (toISOString gives "+010000-…") and nothing was recorded.
// The range is widened to whole days at most, so its end must leave the last day whole.
const FIRST_INSTANT = Date.parse('0000-01-01T00:00:00.000Z');
const LAST_INSTANT = Date.parse('9999-12-31T00:00:00.000Z');

/** A date-time the schema checked; Date reads "t" and "z" (RFC 3339 allows them) only by an implementation's fallback. */
function instantOf(dateTime: string, name: 'from' | 'to'): Date {
  const instant = new Date(dateTime.toUpperCase());
  if (instant.getTime() < FIRST_INSTANT || instant.getTime() > LAST_INSTANT) {
    throw validationError(`query.${name}: must fall within 0000-01-01T00:00:00Z and 9999-12-31T00:00:00Z`);
  }
  return instant;
}

/** The caller's project (any member) and the range the query asks for, checked. */
async function statsQueryOf(ctx: ApiContext, request: StatsRequest): Promise<Query> {
  const { project } = await requireProjectAccess(ctx, request, request.params.projectId, 'read');
  const to = request.query.to === undefined ? ctx.now() : instantOf(request.query.to, 'to');
  // The day before `to`, unless that starts before the first instant an answer can write.
  const from = request.query.from === undefined ? new Date(Math.max(to.getTime() - DAY_MS, FIRST_INSTANT)) : instantOf(request.query.from, 'from');
  if (!(from < to)) throw validationError('query.from must be before query.to');
  const granularity = request.query.granularity ?? (to.getTime() - from.getTime() <= 3 * DAY_MS ? 'hour' : 'day');
  // The limit bounds the periods an answer holds: those of the range rounded out to whole periods.
  if (ceilTo(to.getTime(), granularity) - floorTo(from.getTime(), granularity) > MAX_RANGE_DAYS[granularity] * DAY_MS) {
    throw validationError(`query: a range of ${granularity}s covers at most ${MAX_RANGE_DAYS[granularity]} days, from and to rounded out to whole ${granularity}s`);
  }
  return { projectId: project._id, from, to, granularity, groupBy: request.query.groupBy ?? null };
}

export async function statsRoutes(app: FastifyInstance, ctx: ApiContext): Promise<void> {
  app.addHook('onRequest', requireSession(ctx));

  app.get<{ Params: Static<typeof StatsParams>; Querystring: Static<typeof StatsQuery> }>('/v1/projects/:projectId/stats', {
    schema: { params: StatsParams, querystring: StatsQuery },
    config: { openapi: { summary: 'Deliverability: counts per outcome over time, rates, latencies and failing recipient domains.', responses: { 200: { description: 'The project\'s stats for the range.', schema: ProjectStatsResponse } } } },
  }, async (request) => projectStats(ctx.documents, await statsQueryOf(ctx, request)));

  app.get<{ Params: Static<typeof StatsParams>; Querystring: Static<typeof StatsQuery> }>('/v1/projects/:projectId/stats/chart.svg', {
    schema: { params: StatsParams, querystring: StatsQuery },
    config: { openapi: { summary: 'The stats series as a line chart (sent, delivered, bounced, complained, failed), rendered as SVG; groupBy is ignored.', responses: { 200: { description: 'An SVG image.', mediaType: 'image/svg+xml' } } } },
  }, async (request, reply) => {
    const stats = await projectStats(ctx.documents, { ...(await statsQueryOf(ctx, request)), groupBy: null });
    return reply
      .type('image/svg+xml; charset=utf-8')
      // An image, never a document that runs anything, wherever it is opened.
      .header('content-security-policy', "default-src 'none'; style-src 'unsafe-inline'")
      .header('x-content-type-options', 'nosniff')
      .header('cache-control', 'private, no-store')
      .send(renderStatsChart(stats));
  });
}
