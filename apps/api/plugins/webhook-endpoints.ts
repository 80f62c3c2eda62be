// Webhook endpoints (session API): members read, write roles change; the signing secret is in
// the answer to creation and rotation only. Disabling or deleting one, or taking event types out
// of its events, is answered once the endpoint's change is durable; its pending deliveries (of
// those types) end after, in the background, and
// closing the server waits for that work to leave off (the rest ends as it falls due).
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import {
  createEndpoint, deleteEndpoint, endpointView, getEndpoint, listEndpoints, rotateSecret, updateEndpoint, type EndpointPolicy,
} from '../../services/webhooks/endpoints.ts';
import { requireProjectAccess, requireSession, type AccessMode } from '../auth/session.ts';
import type { ApiContext } from '../context.ts';
import { showsSecret } from '../secret-answers.ts';
import { Id } from './management-schemas.ts';
import { notFound } from '../../../domain/errors.ts';
import { endpointDeliveries } from '../../services/webhooks/deliveries.ts';
import { DeliveryEndings } from '../../services/webhooks/delivery-endings.ts';
import { NoQuery } from './query.schemas.ts';
import {
  CreatedEndpoint, CreateEndpointBody, DeletedEndpoint, DeliveriesQuery, DocumentedCreateEndpointBody, DocumentedUpdateEndpointBody, Endpoint, EndpointDeliveries,
  EndpointList, RotatedSecret, UpdateEndpointBody,
} from './webhook-endpoints.schemas.ts';

const ByProject = Type.Object({ projectId: Id });
const ById = Type.Object({ id: Id });

export async function webhookEndpointRoutes(app: FastifyInstance, ctx: ApiContext): Promise<void> {
  app.addHook('onRequest', requireSession(ctx));
  const policy: EndpointPolicy = { dnsServers: ctx.config.dnsServers, allow: ctx.config.webhookAllow };
  const endings = new DeliveryEndings({
    documents: ctx.documents,
    now: ctx.now,
    onEnded: (reason, count) => ctx.metrics.webhookAttempts(reason).inc(count),
    onError: (error, endpointId) => app.log.error({ err: error, endpointId }, 'ending the pending deliveries of a webhook endpoint disabled, deleted or unsubscribed from event types failed; the rest end as each falls due'),
  });
  // Before the stores close (apps/relay.ts closes the API first): no batch writes after that.
  app.addHook('onClose', () => endings.stop());

  async function requireEndpointAccess(request: FastifyRequest, id: string, mode: AccessMode) {
    const endpoint = await getEndpoint(ctx.documents, id);
    await requireProjectAccess(ctx, request, endpoint.projectId, mode);
    return endpoint;
  }

  app.post<{ Params: Static<typeof ByProject>; Body: CreateEndpointBody }>(
    '/v1/projects/:projectId/webhook-endpoints',
    {
      schema: { params: ByProject, querystring: NoQuery, body: CreateEndpointBody },
      config: { openapi: { body: DocumentedCreateEndpointBody, responses: { 201: { description: 'Created, with its signing secret (shown this once).', schema: CreatedEndpoint } } } },
    },
    async (request, reply) => {
      const { project } = await requireProjectAccess(ctx, request, request.params.projectId, 'write');
      const { endpoint, secret } = await createEndpoint(ctx.documents, ctx.services.secrets, policy, {
        workspaceId: project.workspaceId, projectId: project._id, ...request.body,
      }, ctx.now());
      return showsSecret(reply).status(201).send({ ...endpointView(endpoint), secret });
    },
  );

  app.get<{ Params: Static<typeof ByProject> }>('/v1/projects/:projectId/webhook-endpoints', {
    schema: { params: ByProject, querystring: NoQuery },
    config: { openapi: { responses: { 200: { description: 'The project\'s endpoints.', schema: EndpointList } } } },
  }, async (request) => {
    const { project } = await requireProjectAccess(ctx, request, request.params.projectId, 'read');
    return { endpoints: (await listEndpoints(ctx.documents, project._id)).map(endpointView) };
  });

  app.get<{ Params: Static<typeof ById> }>('/v1/webhook-endpoints/:id', {
    schema: { params: ById, querystring: NoQuery },
    config: { openapi: { responses: { 200: { description: 'The endpoint.', schema: Endpoint } } } },
  }, async (request) =>
    endpointView(await requireEndpointAccess(request, request.params.id, 'read')));

  // The endpoint's recent deliveries with every attempt and what the receiver answered.
  app.get<{ Params: Static<typeof ById>; Querystring: DeliveriesQuery }>('/v1/webhook-endpoints/:id/deliveries', {
    schema: { params: ById, querystring: DeliveriesQuery },
    config: { openapi: { summary: 'The endpoint\'s deliveries, newest first, with their attempt logs (members).', responses: { 200: { description: 'A page of deliveries.', schema: EndpointDeliveries } } } },
  }, async (request) => {
    const endpoint = await requireEndpointAccess(request, request.params.id, 'read');
    const page = await endpointDeliveries(ctx.documents, endpoint._id, { limit: request.query.limit ?? 20, cursor: request.query.cursor });
    if (!page) throw notFound(`delivery ${request.query.cursor} is not one of this endpoint's`);
    return { deliveries: page.deliveries, next_cursor: page.nextCursor };
  });

  app.patch<{ Params: Static<typeof ById>; Body: UpdateEndpointBody }>(
    '/v1/webhook-endpoints/:id',
    {
      schema: { params: ById, querystring: NoQuery, body: UpdateEndpointBody },
      config: { openapi: { body: DocumentedUpdateEndpointBody, responses: { 200: { description: 'The endpoint as changed.', schema: Endpoint } } } },
    },
    async (request) => {
      const endpoint = await requireEndpointAccess(request, request.params.id, 'write');
      return endpointView(await updateEndpoint(ctx.documents, policy, endpoint._id, request.body, ctx.now(), endings));
    },
  );

  app.delete<{ Params: Static<typeof ById> }>('/v1/webhook-endpoints/:id', {
    schema: { params: ById, querystring: NoQuery },
    config: { openapi: { responses: { 200: { description: 'Deleted: the endpoint as it was.', schema: DeletedEndpoint } } } },
  }, async (request) => {
    const endpoint = await requireEndpointAccess(request, request.params.id, 'write');
    await deleteEndpoint(ctx.documents, endpoint._id, endings);
    return { ...endpointView(endpoint), deleted: true };
  });

  app.post<{ Params: Static<typeof ById> }>('/v1/webhook-endpoints/:id/rotate-secret', {
    schema: { params: ById, querystring: NoQuery },
    config: { openapi: { responses: { 200: { description: 'The new signing secret (shown this once); the old one stops signing at once.', schema: RotatedSecret } } } },
  }, async (request, reply) => {
    const endpoint = await requireEndpointAccess(request, request.params.id, 'write');
    return showsSecret(reply).send({ secret: await rotateSecret(ctx.documents, ctx.services.secrets, endpoint._id, ctx.now()) });
  });
}
