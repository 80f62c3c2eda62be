// Sending domains: create (DKIM key + records to publish), read, verify against real DNS,
// connect to and disconnect from projects of the same workspace; rotate the DKIM key (start,
// cancel; a verify that finds the new key's record completes it).
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import { notFound } from '../../../domain/errors.ts';
import {
  connectDomain, createDomain, disconnectDomain, domainsOf, domainView, listDomains, verifyDomain,
} from '../../services/management/domains.ts';
import { cancelDomainDkimRotation, startDomainDkimRotation } from '../../services/management/dkim-rotations.ts';
import { requireProjectAccess, requireSession, requireWorkspaceAccess, type AccessMode } from '../auth/session.ts';
import type { ApiContext } from '../context.ts';
import { Domain, DomainList, Id } from './management-schemas.ts';
import { NoQuery } from './query.schemas.ts';

const CreateDomain = Type.Object({ name: Type.String({ minLength: 1, maxLength: 253 }) }, { additionalProperties: false });
const ByWorkspace = Type.Object({ workspaceId: Id });
const ById = Type.Object({ id: Id });
const ByDomainAndProject = Type.Object({ id: Id, projectId: Id });
const StartRotation = Type.Object(
  { selector: Type.Optional(Type.String({ minLength: 1, maxLength: 63, description: 'The new key\'s selector (DNS labels); default rr<date><random>.' })) },
  { additionalProperties: false },
);

export async function domainRoutes(app: FastifyInstance, ctx: ApiContext): Promise<void> {
  app.addHook('onRequest', requireSession(ctx));
  const dns = ctx.services.dns;
  const view = (domain: Parameters<typeof domainView>[0]) => domainView(domain, ctx.config);

  async function requireDomainAccess(request: FastifyRequest, domainId: string, mode: AccessMode) {
    const domain = await domainsOf(ctx.documents).get(domainId);
    if (!domain) throw notFound(`domain ${domainId} not found`);
    await requireWorkspaceAccess(ctx, request, domain.workspaceId, mode);
    return domain;
  }

  app.post<{ Params: Static<typeof ByWorkspace>; Body: Static<typeof CreateDomain> }>(
    '/v1/workspaces/:workspaceId/domains',
    {
      schema: { params: ByWorkspace, querystring: NoQuery, body: CreateDomain },
      config: { openapi: { responses: { 201: { description: 'Created with a new DKIM key: the records to publish.', schema: Domain } } } },
    },
    async (request, reply) => {
      const { workspace } = await requireWorkspaceAccess(ctx, request, request.params.workspaceId, 'write');
      const domain = await createDomain(ctx.documents, { workspaceId: workspace._id, name: request.body.name }, ctx.now(), ctx.services.secrets);
      return reply.status(201).send(view(domain));
    },
  );

  app.get<{ Params: Static<typeof ByWorkspace> }>('/v1/workspaces/:workspaceId/domains', {
    schema: { params: ByWorkspace, querystring: NoQuery },
    config: { openapi: { responses: { 200: { description: 'The workspace\'s domains.', schema: DomainList } } } },
  }, async (request) => {
    const { workspace } = await requireWorkspaceAccess(ctx, request, request.params.workspaceId, 'read');
    return { domains: (await listDomains(ctx.documents, workspace._id)).map(view) };
  });

  app.get<{ Params: Static<typeof ById> }>('/v1/domains/:id', {
    schema: { params: ById, querystring: NoQuery },
    config: { openapi: { responses: { 200: { description: 'The domain.', schema: Domain } } } },
  }, async (request) =>
    view(await requireDomainAccess(request, request.params.id, 'read')),
  );

  app.post<{ Params: Static<typeof ById> }>('/v1/domains/:id/verify', {
    schema: { params: ById, querystring: NoQuery },
    config: {
      openapi: {
        summary: 'Check the records in DNS; a pending DKIM key rotation whose new record is found completes (the new key signs from then on)',
        responses: { 200: { description: 'The domain after the check.', schema: Domain } },
      },
    },
  }, async (request) => {
    const domain = await requireDomainAccess(request, request.params.id, 'write');
    return view(await verifyDomain(ctx.documents, ctx.config, dns, domain._id, ctx.now()));
  });

  app.post<{ Params: Static<typeof ById>; Body: Static<typeof StartRotation> }>(
    '/v1/domains/:id/dkim-rotation',
    {
      schema: { params: ById, querystring: NoQuery, body: StartRotation },
      config: {
        openapi: {
          summary: 'Start a DKIM key rotation: a new key under a new selector, its record to publish; the current key signs until a verify finds that record (409 conflict while one is pending)',
          optionalBody: true,
          responses: { 201: { description: 'Started: the domain with its pending rotation.', schema: Domain } },
        },
      },
      // Every field is optional: a POST with no body at all asks for the defaults.
      preValidation: async (request) => {
        request.body ??= {};
      },
    },
    async (request, reply) => {
      const domain = await requireDomainAccess(request, request.params.id, 'write');
      const rotating = await startDomainDkimRotation(
        ctx.documents, { domainId: domain._id, selector: request.body.selector, selectorField: 'body.selector' }, ctx.now(), ctx.services.secrets);
      return reply.status(201).send(view(rotating));
    },
  );

  app.delete<{ Params: Static<typeof ById> }>(
    '/v1/domains/:id/dkim-rotation',
    {
      schema: { params: ById, querystring: NoQuery },
      config: {
        openapi: {
          summary: 'Cancel the pending DKIM key rotation: its key is dropped, the current one signs on',
          responses: { 200: { description: 'The domain without a rotation.', schema: Domain } },
        },
      },
    },
    async (request) => {
      const domain = await requireDomainAccess(request, request.params.id, 'write');
      return view(await cancelDomainDkimRotation(ctx.documents, domain._id));
    },
  );

  app.post<{ Params: Static<typeof ByDomainAndProject> }>(
    '/v1/domains/:id/projects/:projectId',
    {
      schema: { params: ByDomainAndProject, querystring: NoQuery },
      config: { openapi: { responses: { 200: { description: 'Connected (already connected: the same answer).', schema: Domain } } } },
    },
    async (request) => {
      const domain = await requireDomainAccess(request, request.params.id, 'write');
      await requireProjectAccess(ctx, request, request.params.projectId, 'write');
      return view(await connectDomain(ctx.documents, domain._id, request.params.projectId));
    },
  );

  app.delete<{ Params: Static<typeof ByDomainAndProject> }>(
    '/v1/domains/:id/projects/:projectId',
    {
      schema: { params: ByDomainAndProject, querystring: NoQuery },
      config: { openapi: { responses: { 200: { description: 'Disconnected (already disconnected: the same answer).', schema: Domain } } } },
    },
    async (request) => {
      const domain = await requireDomainAccess(request, request.params.id, 'write');
      return view(await disconnectDomain(ctx.documents, domain._id, request.params.projectId));
    },
  );
}
