// A project's deliverability stats, for its workspace's members (any role).
import type { FastifyInstance } from 'fastify';
import type { Static } from '@sinclair/typebox';
import { validationError } from '../../../domain/errors.ts';
import { projectStats, type Granularity } from '../../services/deliverability-stats.ts';
import { requireProjectAccess, requireSession } from '../auth/session.ts';
import type { ApiContext } from '../context.ts';
import { ProjectStatsResponse, StatsParams, StatsQuery } from './stats.schemas.ts';

const DAY_MS = 86_400_000;
const MAX_RANGE_DAYS: Record<Granularity, number> = { hour: 31, day: 400 };

export async function statsRoutes(app: FastifyInstance, ctx: ApiContext): Promise<void> {
  app.addHook('onRequest', requireSession(ctx));

  app.get<{ Params: Static<typeof StatsParams>; Querystring: Static<typeof StatsQuery> }>('/v1/projects/:projectId/stats', {
    schema: { params: StatsParams, querystring: StatsQuery },
    config: { openapi: { summary: 'Deliverability: counts per outcome over time, rates, latencies and failing recipient domains.', responses: { 200: { description: 'The project\'s stats for the range.', schema: ProjectStatsResponse } } } },
  }, async (request) => {
    const { project } = await requireProjectAccess(ctx, request, request.params.projectId, 'read');
    const to = request.query.to === undefined ? ctx.now() : new Date(request.query.to);
    const from = request.query.from === undefined ? new Date(to.getTime() - DAY_MS) : new Date(request.query.from);
    if (!(from < to)) throw validationError('query.from must be before query.to');
    const granularity = request.query.granularity ?? (to.getTime() - from.getTime() <= 3 * DAY_MS ? 'hour' : 'day');
    if (to.getTime() - from.getTime() > MAX_RANGE_DAYS[granularity] * DAY_MS) {
      throw validationError(`query: a range of ${granularity}s covers at most ${MAX_RANGE_DAYS[granularity]} days`);
    }
    return projectStats(ctx.documents, { projectId: project._id, from, to, granularity, groupBy: request.query.groupBy ?? null });
  });
}
