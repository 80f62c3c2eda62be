// Builds the HTTP API: one fastify plugin per resource, the spec's error envelope
// everywhere, JSON bodies up to the spec's 10 MiB (UTF-8, bounded before parsing: body-parser.ts).
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import cookie from '@fastify/cookie';
import type { ApiContext } from './context.ts';
import { jsonBodyParser } from './body-parser.ts';
import { clientErrorHandler, installConnectionLimits, limitsOf, serverOptionsOf, stopDrainOf, type ConnectionLimits } from './connection-limits.ts';
import { envelope, parserErrorCode, registerErrorHandling } from './error-registry.ts';
import { refuseTunnel, requestTargets } from './request-targets.ts';
import { apiKeyRoutes } from './plugins/api-keys.ts';
import { domainRoutes } from './plugins/domains.ts';
import { emailRoutes } from './plugins/emails.ts';
import { healthRoutes } from './plugins/health.ts';
import { installHttpMetrics, metricsRoutes } from './plugins/metrics.ts';
import { outboxRoutes } from './plugins/outbox.ts';
import { webhookEndpointRoutes } from './plugins/webhook-endpoints.ts';
import { projectEmailRoutes } from './plugins/project-emails.ts';
import { projectRoutes } from './plugins/projects.ts';
import { sessionRoutes } from './plugins/session.ts';
import { statsRoutes } from './plugins/stats.ts';
import { suppressionRoutes } from './plugins/suppressions.ts';
import { templateRoutes } from './plugins/templates.ts';
import { usageRoutes } from './plugins/usage.ts';
import { workspaceRoutes } from './plugins/workspaces.ts';
import { recordRoutes, type Security } from './openapi.ts';
import { asyncApiDocument } from '../services/event-catalog.ts';
import { installTypeBoxValidation } from './validation.ts';
import { UNMATCHED_ROUTE } from '../relay-metrics.ts';
import { dashboardRoutes, type UnknownAddressAnswer } from '../dashboard/dashboard.ts';
import type { Logger } from '../../infra/logging.ts';

/** The answer's header holding the request's id (the `requestId` of its request line). */
export const REQUEST_ID_HEADER = 'x-request-id';

/** The spec's limit on a complete JSON request; fastify refuses larger bodies while streaming them. */
export const MAX_REQUEST_BYTES = 10 * 1024 * 1024;

export interface ApiOptions {
  /** false silences request logs (tests); otherwise a pino level. */
  logLevel?: string | false;
  /** The process's logger (infra/logging.ts): request lines then share its format; logLevel is then ignored. */
  logger?: Logger;
  /** 'health' serves only /healthz and /readyz: what processor processes expose. */
  routes?: 'all' | 'health';
  /** Timeouts, the body budget and the drain after refusals (DEFAULT_LIMITS in connection-limits.ts); tests shrink them. */
  limits?: Partial<ConnectionLimits>;
  /** Serve GET /metrics here (default); false when it has a listener of its own or is off (RELAY_METRICS_PORT). */
  metricsRoute?: boolean;
}

/** The tenant of an admitted email, as the send's principal holds it (apps/services/admission.ts Sender). */
export interface AdmittedFor {
  workspaceId: string;
  projectId: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    /**
     * The email a send answered (202, a replay included), and whose it is: its request line names
     * them, the one line every email gets at the default level. Two fields set by the send's
     * handler (apps/api/plugins/emails.ts), null on every other request: a child logger would cost
     * admission a logger and its serialized bindings.
     */
    admittedEmailId: string | null;
    admittedFor: AdmittedFor | null;
  }
}

/**
 * One line per request, when it is answered: method, route pattern (`unmatched` when no route
 * matched: the raw URL can carry ids and query strings), status, duration, and the request id
 * the logger's child already carries; a send's names the email it admitted. fastify's own pair
 * of lines (arrival, completion) cost 5-8 % of an admission's CPU and named neither the method
 * nor the route.
 */
class OneLinePerRequest extends LogController {
  override incomingRequest(): void {}

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    const method = request.method;
    const route = request.is404 ? UNMATCHED_ROUTE : request.routeOptions.url ?? UNMATCHED_ROUTE;
    const status = reply.statusCode;
    const durationMs = Math.round(reply.elapsedTime * 10) / 10;
    const emailId = request.admittedEmailId;
    const line = emailId === null || request.admittedFor === null
      ? { method, route, status, durationMs }
      : { method, route, status, durationMs, emailId, workspaceId: request.admittedFor.workspaceId, projectId: request.admittedFor.projectId };
    if (error) reply.log.error({ ...line, err: error }, 'request failed');
    else reply.log.info(line, 'request');
  }
}

export async function buildApi(ctx: ApiContext, options: ApiOptions = {}): Promise<FastifyInstance> {
  const { metrics } = ctx;
  const level = options.logLevel ?? ctx.config.logLevel;
  const limits = limitsOf({ stopDrainMs: stopDrainOf(ctx.config.shutdownTimeoutMs), ...options.limits });
  const onClientError = clientErrorHandler(limits);
  const targets = requestTargets();
  const app = Fastify({
    ...(options.logger ? { loggerInstance: options.logger as FastifyBaseLogger } : { logger: level === false || level === 'silent' ? false : { level } }),
    logController: new OneLinePerRequest({ requestIdLogLabel: 'requestId' }),
    bodyLimit: MAX_REQUEST_BYTES,
    // Header, request, keep-alive and idle timeouts; Node's own refusals in the envelope.
    ...serverOptionsOf(limits),
    // (llhttp's code alone does not tell a malformed request line from a version not served.)
    clientErrorHandler(this: FastifyInstance, error: NodeJS.ErrnoException & { reason?: string }, socket: Socket) {
      error.code = parserErrorCode(error);
      onClientError.call(this, error, socket);
    },
    // Each request target routes as its path, or to no route with the answer it is owed (requestTargets).
    rewriteUrl: (request) => targets.rewrite(request),
    // Request ids become the correlation id of the events a request appends: unique across
    // processes and restarts, unlike fastify's per-process counter.
    genReqId: () => randomUUID(),
    // The client's address (sign-in throttling, request logs) is the peer's unless the peer is a
    // proxy the operator listed: then the nearest address X-Forwarded-For names that is not one.
    trustProxy: ctx.config.trustProxy.length > 0 ? ctx.config.trustProxy : false,
    // Requests arriving while the server drains get our own 503, in the envelope (connection-limits.ts).
    return503OnClosing: false,
    // The router's own refusals (an undecodable %-escape, a path parameter over its length
    // limit) happen before any hook; they are bad identifiers, in the envelope like the rest.
    frameworkErrors: (error, request, reply) => {
      const message = error.code === 'FST_ERR_MAX_PARAM_LENGTH' ? 'path: a path parameter is too long' : 'path: the URL is not valid percent-encoded UTF-8';
      // Before any hook: the request id is set here as the first hook sets it for the rest.
      return (reply as unknown as FastifyReply).header(REQUEST_ID_HEADER, request.id).status(400).send(envelope('validation_error', message));
    },
  });
  // Before any route or scope: each copies the parsers it finds when it is made.
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, jsonBodyParser(app));
  app.decorateRequest('admittedEmailId', null);
  app.decorateRequest('admittedFor', null);
  // The first hook of every request, so that a refusal by any later hook carries it too: a client
  // that got a 500 can quote the id its request line and its events' correlationId hold.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header(REQUEST_ID_HEADER, request.id);
    done();
  });
  installTypeBoxValidation(app);
  // A browser's navigation to an address that is no page gets the dashboard's own "Page not
  // found", once the dashboard is registered below (not in a process that serves health alone).
  let unknownAddress: UnknownAddressAnswer | undefined;
  registerErrorHandling(app, (request, reply) => targets.answer(request, reply) ?? unknownAddress?.(request, reply));
  // Before any route: the methods OPTIONS * names.
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) targets.methods.add(method);
  });
  // CONNECT asks for a tunnel (RFC 9110 9.3.6), which Node hands to 'connect' listeners, past
  // every route; with none it drops the connection without an answer, and with it the answers
  // owed to the requests pipelined before it. Relay is no proxy: no route serves it.
  app.server.on('connect', (request: IncomingMessage, socket: Socket) => refuseTunnel(request, socket, limits.unauthenticatedLingerMs));
  // Before any route: each route gets its counters as it is declared.
  installHttpMetrics(app, metrics);
  // Every route from here on is recorded for the OpenAPI document (apps/api/openapi.ts).
  const routes = recordRoutes(app);
  // Bodies against the process's budget; refusals before the body close the connection; a stop's drain.
  installConnectionLimits(app, limits, MAX_REQUEST_BYTES);
  // Parses Cookie headers for the dashboard session (apps/api/auth/session.ts); unsigned: the
  // token is itself a 256-bit secret looked up by hash.
  await app.register(cookie);
  await app.register(async (scope) => {
    routes.secure(scope, 'none');
    await healthRoutes(scope, ctx);
    if (options.metricsRoute !== false) await metricsRoutes(scope, metrics);
  });
  if (options.routes !== 'health') {
    for (const [plugin, security] of routePlugins) {
      await app.register(async (scope) => {
        routes.secure(scope, security);
        await plugin(scope, ctx);
      });
    }
    // The interface itself, for clients and their generators: public, like the specification it implements.
    await app.register(async (scope) => {
      routes.secure(scope, 'none');
      scope.get('/v1/openapi.json', {
        config: { openapi: { summary: 'This document (OpenAPI 3.1).', responses: { 200: { description: 'The OpenAPI document of this API.' } } } },
      }, async () => routes.document());
      const events = asyncApiDocument();
      scope.get('/v1/asyncapi.json', {
        config: { openapi: { summary: 'The event catalog (AsyncAPI 3.0): every event type, its fields, version, upcasting and meaning.', responses: { 200: { description: 'The AsyncAPI document of the `<namespace>.events` topic.' } } } },
      }, async () => events);
    });
    // The dashboard (apps/dashboard/): pages and browser modules, a client of the routes above.
    await app.register(async (scope) => {
      routes.omit(scope);
      unknownAddress = await dashboardRoutes(scope, ctx.config);
    });
  }
  // Built once every route is declared: a route without a recorded authentication stops the
  // start with a message naming it, rather than a 500 from GET /v1/openapi.json later.
  app.addHook('onReady', async () => void routes.document());
  return app;
}

type RoutePlugin = (app: FastifyInstance, ctx: ApiContext) => Promise<void>;

/** Resource plugins, registered in this order, with the authentication their routes need (the plugins enforce it). */
const routePlugins: Array<[RoutePlugin, Security]> = [
  [emailRoutes, 'apiKey'],
  [projectEmailRoutes, 'session'],
  [sessionRoutes, 'session'],
  [workspaceRoutes, 'session'],
  [projectRoutes, 'session'],
  [domainRoutes, 'session'],
  [apiKeyRoutes, 'session'],
  [suppressionRoutes, 'session'],
  [templateRoutes, 'session'],
  [outboxRoutes, 'session'],
  [webhookEndpointRoutes, 'session'],
  [statsRoutes, 'session'],
  [usageRoutes, 'session'],
];
