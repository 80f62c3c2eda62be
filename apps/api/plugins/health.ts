// Liveness says the process answers; readiness says its stores answer and its
// processors run, so a load balancer only routes to a process that can do the work.
//
// What turns /readyz to 503: a store that does not answer, or a processor of this process that
// is stuck (apps/processors/processor.ts: it held one record past its stuckAfterMs, 60 s by
// default: a store outage, or a handler that never returns): `checks.<processor>` is false and
// the process logged why at warn. Restarting or rescheduling that process is the remedy.
// Parked events do NOT turn it to 503: the processor went past them and keeps up, and taking
// instances out of rotation would turn one bad event into an outage. They are counted in the
// body (`parked`, for every process, from the shared document store) and each was logged at
// warn when parked: alert on `parked.total > 0`, then `relay parked list` / `relay parked retry`.
import type { FastifyInstance } from 'fastify';
import type { ApiContext } from '../context.ts';
import { PROCESSORS } from '../../processors/registry.ts';
import { countParked, rebuildGroup } from '../../services/parked-events.ts';
import { PROJECTIONS } from '../../services/projection-registry.ts';

const PARKING_NAMES = [...PROCESSORS.map((p) => p.name), ...Object.keys(PROJECTIONS).map((name) => rebuildGroup(name).processor)];

export async function healthRoutes(app: FastifyInstance, ctx: ApiContext): Promise<void> {
  app.get('/healthz', { config: { openapi: { summary: 'Liveness: the process answers.', responses: { 200: { description: '{"status": "ok"}' } } } } }, async () => ({ status: 'ok' }));
  app.get('/readyz', {
    config: {
      openapi: {
        summary: 'Readiness: the stores answer and this process\'s parts run; counts parked events.',
        responses: { 200: { description: 'Ready: {"status": "ready", "checks": {…}, "parked": {…}}' }, 503: { description: 'Not ready: "status": "not_ready", a check false.' } },
      },
    },
  }, async (_request, reply) => {
    const timeout = <T>(p: Promise<T>, fallback: T) =>
      Promise.race([p.catch(() => fallback), new Promise<T>((r) => setTimeout(() => r(fallback), 2000).unref())]);
    const [eventStore, documentStore, parts, parked] = await Promise.all([
      timeout(ctx.events.ping(), false),
      timeout(ctx.documents.ping(), false),
      timeout(ctx.readiness(), { readiness: false } as Record<string, boolean>),
      timeout(countParked(ctx.documents, PARKING_NAMES), null),
    ]);
    const checks: Record<string, boolean> = { eventStore, documentStore, ...parts };
    const ready = Object.values(checks).every(Boolean);
    // parked: null when the count could not be read (documentStore says why).
    return reply.status(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not_ready', checks, parked });
  });
}
