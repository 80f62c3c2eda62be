// Builds the HTTP API: one fastify plugin per resource, the spec's error envelope
// everywhere, JSON bodies up to the spec's 10 MiB.
import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import cookie from '@fastify/cookie';
import type { ApiContext } from './context.ts';
import { clientErrorHandler, installConnectionLimits, limitsOf, serverOptionsOf, type ConnectionLimits } from './connection-limits.ts';
import { envelope, registerErrorHandling } from './error-registry.ts';
import { apiKeyRoutes } from './plugins/api-keys.ts';
import { domainRoutes } from './plugins/domains.ts';
import { emailRoutes } from './plugins/emails.ts';
import { healthRoutes } from './plugins/health.ts';
import { outboxRoutes } from './plugins/outbox.ts';
import { webhookEndpointRoutes } from './plugins/webhook-endpoints.ts';
import { projectRoutes } from './plugins/projects.ts';
import { sessionRoutes } from './plugins/session.ts';
import { suppressionRoutes } from './plugins/suppressions.ts';
import { templateRoutes } from './plugins/templates.ts';
import { workspaceRoutes } from './plugins/workspaces.ts';
import { installTypeBoxValidation } from './validation.ts';

/** The spec's limit on a complete JSON request; fastify refuses larger bodies while streaming them. */
export const MAX_REQUEST_BYTES = 10 * 1024 * 1024;

export interface ApiOptions {
  /** false silences request logs (tests); otherwise a pino level. */
  logLevel?: string | false;
  /** 'health' serves only /healthz and /readyz: what processor processes expose. */
  routes?: 'all' | 'health';
  /** Timeouts, the body budget and the drain after refusals (DEFAULT_LIMITS in connection-limits.ts); tests shrink them. */
  limits?: Partial<ConnectionLimits>;
}

export async function buildApi(ctx: ApiContext, options: ApiOptions = {}): Promise<FastifyInstance> {
  const level = options.logLevel ?? ctx.config.logLevel;
  const limits = limitsOf(options.limits);
  const app = Fastify({
    logger: level === false || level === 'silent' ? false : { level },
    bodyLimit: MAX_REQUEST_BYTES,
    // Header, request, keep-alive and idle timeouts; Node's own refusals in the envelope.
    ...serverOptionsOf(limits),
    clientErrorHandler: clientErrorHandler(limits),
    // Request ids become the correlation id of the events a request appends: unique across
    // processes and restarts, unlike fastify's per-process counter.
    genReqId: () => randomUUID(),
    // Behind a proxy the operator sets this through the proxy's own headers; off by default.
    trustProxy: false,
    // Requests arriving while the server drains get our own 503 (below), in the envelope.
    return503OnClosing: false,
    // The router's own refusals (an undecodable %-escape, a path parameter over its length
    // limit) happen before any hook; they are bad identifiers, in the envelope like the rest.
    frameworkErrors: (error, _request, reply) => {
      const message = error.code === 'FST_ERR_MAX_PARAM_LENGTH' ? 'path: a path parameter is too long' : 'path: the URL is not valid percent-encoded UTF-8';
      return (reply as unknown as FastifyReply).status(400).send(envelope('validation_error', message));
    },
  });
  installTypeBoxValidation(app);
  registerErrorHandling(app);
  let draining = false;
  app.addHook('preClose', async () => {
    draining = true;
  });
  app.addHook('onRequest', async (_request, reply) => {
    if (!draining) return;
    reply.header('connection', 'close').header('retry-after', '1');
    return reply.status(503).send(envelope('service_unavailable', 'the server is shutting down; retry shortly'));
  });
  // Bodies against the process's budget; refusals before the body close the connection.
  installConnectionLimits(app, limits, MAX_REQUEST_BYTES);
  // Parses Cookie headers for the dashboard session (apps/api/auth/session.ts); unsigned: the
  // token is itself a 256-bit secret looked up by hash.
  await app.register(cookie);
  await app.register(async (scope) => healthRoutes(scope, ctx));
  if (options.routes !== 'health') {
    for (const plugin of routePlugins) await app.register(async (scope) => plugin(scope, ctx));
  }
  return app;
}

type RoutePlugin = (app: FastifyInstance, ctx: ApiContext) => Promise<void>;

/** Resource plugins, registered in this order. */
const routePlugins: RoutePlugin[] = [
  emailRoutes,
  sessionRoutes,
  workspaceRoutes,
  projectRoutes,
  domainRoutes,
  apiKeyRoutes,
  suppressionRoutes,
  templateRoutes,
  outboxRoutes,
  webhookEndpointRoutes,
];
