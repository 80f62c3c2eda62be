// Sending domains: create (DKIM key + records to publish), read, verify against real DNS,
// connect to and disconnect from projects of the same workspace.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import { notFound } from '../../../domain/errors.ts';
import {
  connectDomain, createDomain, disconnectDomain, domainsOf, domainView, listDomains, verifyDomain,
} from '../../services/management/domains.ts';
import { requireProjectAccess, requireSession, requireWorkspaceAccess, type AccessMode } from '../auth/session.ts';
import type { ApiContext } from '../context.ts';
import { Id } from './management-schemas.ts';
import { NoQuery } from './query.schemas.ts';

const CreateDomain = Type.Object({ name: Type.String({ minLength: 1, maxLength: 253 }) }, { additionalProperties: false });
const ByWorkspace = Type.Object({ workspaceId: Id });
const ById = Type.Object({ id: Id });
const ByDomainAndProject = Type.Object({ id: Id, projectId: Id });

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
    { schema: { params: ByWorkspace, querystring: NoQuery, body: CreateDomain } },
    async (request, reply) => {
      const { workspace } = await requireWorkspaceAccess(ctx, request, request.params.workspaceId, 'write');
      const domain = await createDomain(ctx.documents, { workspaceId: workspace._id, name: request.body.name }, ctx.now(), ctx.services.secrets);
      return reply.status(201).send(view(domain));
    },
  );

  app.get<{ Params: Static<typeof ByWorkspace> }>('/v1/workspaces/:workspaceId/domains', { schema: { params: ByWorkspace, querystring: NoQuery } }, async (request) => {
    const { workspace } = await requireWorkspaceAccess(ctx, request, request.params.workspaceId, 'read');
    return { domains: (await listDomains(ctx.documents, workspace._id)).map(view) };
  });

  app.get<{ Params: Static<typeof ById> }>('/v1/domains/:id', { schema: { params: ById, querystring: NoQuery } }, async (request) =>
    view(await requireDomainAccess(request, request.params.id, 'read')),
  );

  app.post<{ Params: Static<typeof ById> }>('/v1/domains/:id/verify', { schema: { params: ById, querystring: NoQuery } }, async (request) => {
    const domain = await requireDomainAccess(request, request.params.id, 'write');
    return view(await verifyDomain(ctx.documents, ctx.config, dns, domain._id, ctx.now()));
  });

  app.post<{ Params: Static<typeof ByDomainAndProject> }>(
    '/v1/domains/:id/projects/:projectId',
    { schema: { params: ByDomainAndProject, querystring: NoQuery } },
    async (request) => {
      const domain = await requireDomainAccess(request, request.params.id, 'write');
      await requireProjectAccess(ctx, request, request.params.projectId, 'write');
      return view(await connectDomain(ctx.documents, domain._id, request.params.projectId));
    },
  );

  app.delete<{ Params: Static<typeof ByDomainAndProject> }>(
    '/v1/domains/:id/projects/:projectId',
    { schema: { params: ByDomainAndProject, querystring: NoQuery } },
    async (request) => {
      const domain = await requireDomainAccess(request, request.params.id, 'write');
      return view(await disconnectDomain(ctx.documents, domain._id, request.params.projectId));
    },
  );
}
