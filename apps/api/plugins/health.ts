// Liveness says the process answers; readiness says its stores answer and its
// processors run, so a load balancer only routes to a process that can do the work.
import type { FastifyInstance } from 'fastify';
import type { ApiContext } from '../context.ts';

export async function healthRoutes(app: FastifyInstance, ctx: ApiContext): Promise<void> {
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_request, reply) => {
    const timeout = <T>(p: Promise<T>, fallback: T) =>
      Promise.race([p.catch(() => fallback), new Promise<T>((r) => setTimeout(() => r(fallback), 2000).unref())]);
    const [eventStore, documentStore, parts] = await Promise.all([
      timeout(ctx.events.ping(), false),
      timeout(ctx.documents.ping(), false),
      timeout(ctx.readiness(), { readiness: false } as Record<string, boolean>),
    ]);
    const checks: Record<string, boolean> = { eventStore, documentStore, ...parts };
    const ready = Object.values(checks).every(Boolean);
    return reply.status(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not_ready', checks });
  });
}
