// /healthz says the process answers; /readyz says its stores answer and its long-running parts
// work, so a load balancer only routes to a process that can do the work.
//
// What turns /readyz to 503: a store that does not answer or takes no writes (`stores.<store>.reason`
// says why when the store knows: the embedded store on a full disk, after a failed sync, or with
// its write lock held by another process past the busy timeout, whichever of `relay start`'s
// threads wrote; apps/liveness.ts judgeStore, the rule relay_store_ready shows too), or a part of this process (the
// forwarder, a processor or its dispatcher, retention, inbound, a worker thread, the pipeline
// thread) that apps/liveness.ts judges not ready: it stopped, it has been recovering for 60 s,
// or it has had work waiting and made no progress for 60 s (a processor also when it held one
// record that long). `checks.<part>` is false, `parts.<part>.reason` says why, and the process
// logged it at warn. Restarting or rescheduling that process is the remedy when it does not
// recover by itself.
// Parked events do NOT turn it to 503: the processor went past them and keeps up, and taking
// instances out of rotation would turn one bad event into an outage. They are counted in the
// body (`parked`, for every process, from the shared document store) and each was logged at
// warn when parked: alert on `parked.total > 0`, then `relay parked list` / `relay parked retry`.
import type { FastifyInstance } from 'fastify';
import type { ApiContext, Readiness } from '../context.ts';
import { judgeStore } from '../../liveness.ts';
import { PROCESSORS } from '../../processors/registry.ts';
import { countParked, rebuildGroup } from '../../services/parked-events.ts';
import { PROJECTIONS } from '../../services/projection-registry.ts';

const PARKING_NAMES = [...PROCESSORS.map((p) => p.name), ...Object.keys(PROJECTIONS).map((name) => rebuildGroup(name).processor)];

export async function healthRoutes(app: FastifyInstance, ctx: ApiContext): Promise<void> {
  app.get('/healthz', { config: { openapi: { summary: 'Liveness: the process answers.', responses: { 200: { description: '{"status": "ok"}' } } } } }, async () => ({ status: 'ok' }));
  app.get('/readyz', {
    config: {
      openapi: {
        summary: 'Readiness: the stores answer and this process\'s parts run; each part\'s liveness; counts parked events.',
        responses: {
          200: { description: 'Ready: {"status": "ready", "checks": {…}, "stores": {"<store>": {"ready", "reason"}}, "parts": {"<part>": {"state", "since", "lastProgressAt", "workWaiting", "error", "stuck", "ready", "reason"}}, "parked": {…}}' },
          503: { description: 'Not ready: "status": "not_ready", a check false (a store\'s or a part\'s "reason" says why).' },
        },
      },
    },
  }, async (_request, reply) => {
    const timeout = <T>(p: Promise<T>, fallback: T) =>
      Promise.race([p.catch(() => fallback), new Promise<T>((r) => setTimeout(() => r(fallback), 2000).unref())]);
    const [eventStore, documentStore, parts, parked] = await Promise.all([
      judgeStore(ctx.judgedStores?.events ?? ctx.events),
      judgeStore(ctx.judgedStores?.documents ?? ctx.documents),
      timeout(ctx.readiness(), { checks: { readiness: false }, parts: {} } as Readiness),
      timeout(countParked(ctx.documents, PARKING_NAMES), null),
    ]);
    const checks: Record<string, boolean> = { eventStore: eventStore.ready, documentStore: documentStore.ready, ...parts.checks };
    const ready = Object.values(checks).every(Boolean);
    // parked: null when the count could not be read (documentStore says why).
    return reply.status(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not_ready', checks, stores: { eventStore, documentStore }, parts: parts.parts, parked });
  });
}
