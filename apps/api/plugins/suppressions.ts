// A workspace's suppression list: every member reads it, owners and admins change it.
import type { FastifyInstance } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import { addSuppression, listSuppressions, normalizeSuppressedAddress, removeSuppression, suppressionView } from '../../services/management/suppressions.ts';
import { requireSession, requireWorkspaceAccess, requireWorkspaceRole } from '../auth/session.ts';
import type { ApiContext } from '../context.ts';
import { Address, Id } from './management-schemas.ts';

const ByWorkspace = Type.Object({ workspaceId: Id });
const ByAddress = Type.Object({ workspaceId: Id, address: Address });
const AddBody = Type.Object({ address: Address }, { additionalProperties: false });
const Page = Type.Object(
  { limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })), cursor: Type.Optional(Address) },
  { additionalProperties: false },
);

export async function suppressionRoutes(app: FastifyInstance, ctx: ApiContext): Promise<void> {
  app.addHook('onRequest', requireSession(ctx));

  app.get<{ Params: Static<typeof ByWorkspace>; Querystring: Static<typeof Page> }>(
    '/v1/workspaces/:workspaceId/suppressions',
    { schema: { params: ByWorkspace, querystring: Page } },
    async (request) => {
      const { workspace } = await requireWorkspaceAccess(ctx, request, request.params.workspaceId, 'read');
      const cursor = request.query.cursor === undefined ? undefined : normalizeSuppressedAddress(request.query.cursor, 'query.cursor');
      const page = await listSuppressions(ctx.documents, workspace._id, { limit: request.query.limit ?? 50, cursor });
      return { suppressions: page.entries.map(suppressionView), next_cursor: page.nextCursor };
    },
  );

  app.post<{ Params: Static<typeof ByWorkspace>; Body: Static<typeof AddBody> }>(
    '/v1/workspaces/:workspaceId/suppressions',
    { schema: { params: ByWorkspace, body: AddBody } },
    async (request, reply) => {
      const { workspace } = await requireWorkspaceRole(ctx, request, request.params.workspaceId, 'admin');
      return reply.status(201).send(suppressionView(await addSuppression(ctx.documents, workspace._id, request.body.address, ctx.now())));
    },
  );

  app.delete<{ Params: Static<typeof ByAddress> }>(
    '/v1/workspaces/:workspaceId/suppressions/:address',
    { schema: { params: ByAddress } },
    async (request) => {
      const { workspace } = await requireWorkspaceRole(ctx, request, request.params.workspaceId, 'admin');
      await removeSuppression(ctx.documents, workspace._id, request.params.address);
      return { deleted: true, address: normalizeSuppressedAddress(request.params.address, 'path.address') };
    },
  );
}
