// GET /metrics (Prometheus text format) and the HTTP counters behind it. Unauthenticated, as
// /healthz and /readyz: it names no tenant, address or id (routes are patterns), and a
// scraper has no API key; RELAY_METRICS_PORT moves it to a listener of its own, e.g. on an
// address only the monitoring network reaches (apps/api/INTERFACE-DECISIONS.md, Monitoring).
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction, onResponseHookHandler } from 'fastify';
import { PROMETHEUS_CONTENT_TYPE } from '../../../infra/metrics/registry.ts';
import { UNMATCHED_ROUTE, type RelayMetrics } from '../../relay-metrics.ts';

/**
 * Counts every response by route pattern, method and status, with its latency. Installed on
 * the root before any route: each route gets its own onResponse hook that already knows its
 * pattern (request.routeOptions would build an object per request to say it).
 */
export function installHttpMetrics(app: FastifyInstance, metrics: RelayMetrics): void {
  app.addHook('onRoute', (route) => {
    const recorder = metrics.route(route.url);
    const hook: onResponseHookHandler = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => {
      recorder.record(request.method, reply.statusCode, reply.elapsedTime / 1000);
      done();
    };
    const existing = route.onResponse;
    route.onResponse = existing === undefined ? [hook] : [...(Array.isArray(existing) ? existing : [existing]), hook];
  });
  // Requests no route matched (404) pass only through the root's hooks.
  const unmatched = metrics.route(UNMATCHED_ROUTE);
  app.addHook('onResponse', (request, reply, done) => {
    if (request.is404) unmatched.record(request.method, reply.statusCode, reply.elapsedTime / 1000);
    done();
  });
}

export async function metricsRoutes(app: FastifyInstance, metrics: RelayMetrics): Promise<void> {
  app.get('/metrics', {
    config: { openapi: { summary: 'Metrics in the Prometheus text format (README, Monitoring).', responses: { 200: { description: 'Counters, histograms and gauges of this process.', mediaType: 'text/plain' } } } },
  }, async (_request, reply) => reply.type(PROMETHEUS_CONTENT_TYPE).send(await metrics.render()));
}
