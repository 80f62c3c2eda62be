// A workspace's suppression list: every member reads it, owners and admins change it.
import type { FastifyInstance } from 'fastify';
import { originOfRequest } from '../../../domain/events/metadata.ts';
import { Type, type Static } from '@sinclair/typebox';
import { addSuppression, listSuppressions, normalizeSuppressedAddress, removeSuppression, suppressionView } from '../../services/management/suppressions.ts';
import { requireSession, requireWorkspaceAccess, requireWorkspaceRole } from '../auth/session.ts';
import type { ApiContext } from '../context.ts';
import { Address, Id } from './management-schemas.ts';

const ByWorkspace = Type.Object({ workspaceId: Id });
const ByAddress = Type.Object({ workspaceId: Id, address: Address });
const AddBody = Type.Object({ address: Address }, { additionalProperties: false });
const Page = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
    cursor: Type.Optional(Address),
    prefix: Type.Optional(Type.String({ minLength: 1, maxLength: 254, pattern: '^[^\\u0000-\\u001f\\u007f-\\u009f]*$', errorMessage: 'must be the beginning of an address: 1 to 254 characters without control characters' })),
  },
  { additionalProperties: false },
);

/** A CSV field (RFC 4180), and never a formula: a spreadsheet would run a value beginning with = + - @. */
const csvField = (value: string) => {
  const safe = /^[=+\-@\t\r]/.test(value) ? `'${value}` : value;
  return /[",\r\n]/.test(safe) ? `"${safe.replace(/"/g, '""')}"` : safe;
};
const EXPORT_PAGE = 500;

export async function suppressionRoutes(app: FastifyInstance, ctx: ApiContext): Promise<void> {
  app.addHook('onRequest', requireSession(ctx));

  app.get<{ Params: Static<typeof ByWorkspace>; Querystring: Static<typeof Page> }>(
    '/v1/workspaces/:workspaceId/suppressions',
    { schema: { params: ByWorkspace, querystring: Page } },
    async (request) => {
      const { workspace } = await requireWorkspaceAccess(ctx, request, request.params.workspaceId, 'read');
      const cursor = request.query.cursor === undefined ? undefined : normalizeSuppressedAddress(request.query.cursor, 'query.cursor');
      const page = await listSuppressions(ctx.documents, workspace._id, { limit: request.query.limit ?? 50, cursor, prefix: request.query.prefix });
      return { suppressions: page.entries.map(suppressionView), next_cursor: page.nextCursor };
    },
  );

  // The whole list as CSV, in address order: a file people open in a spreadsheet or import elsewhere.
  app.get<{ Params: Static<typeof ByWorkspace> }>(
    '/v1/workspaces/:workspaceId/suppressions/export',
    { schema: { params: ByWorkspace }, config: { openapi: { summary: 'Every suppression of the workspace as CSV (address, reason, email_id, created_at).', responses: { 200: { description: 'The list as CSV.', mediaType: 'text/csv' } } } } },
    async (request, reply) => {
      const { workspace } = await requireWorkspaceAccess(ctx, request, request.params.workspaceId, 'read');
      const lines = ['address,reason,email_id,created_at'];
      let cursor: string | undefined;
      do {
        const page = await listSuppressions(ctx.documents, workspace._id, { limit: EXPORT_PAGE, cursor });
        for (const entry of page.entries) lines.push([entry.address, entry.reason, entry.emailId ?? '', entry.createdAt].map(csvField).join(','));
        cursor = page.nextCursor ?? undefined;
      } while (cursor !== undefined);
      return reply
        .type('text/csv; charset=utf-8')
        .header('content-disposition', `attachment; filename="suppressions-${workspace._id}.csv"`)
        .header('cache-control', 'private, no-store')
        .send(`${lines.join('\r\n')}\r\n`);
    },
  );

  app.post<{ Params: Static<typeof ByWorkspace>; Body: Static<typeof AddBody> }>(
    '/v1/workspaces/:workspaceId/suppressions',
    { schema: { params: ByWorkspace, body: AddBody } },
    async (request, reply) => {
      const { workspace, principal } = await requireWorkspaceRole(ctx, request, request.params.workspaceId, 'admin');
      const entry = await addSuppression(ctx, workspace._id, request.body.address, ctx.now(), { kind: 'user', userId: principal.user._id }, originOfRequest(request.id));
      return reply.status(201).send(suppressionView(entry));
    },
  );

  app.delete<{ Params: Static<typeof ByAddress> }>(
    '/v1/workspaces/:workspaceId/suppressions/:address',
    { schema: { params: ByAddress } },
    async (request) => {
      const { workspace, principal } = await requireWorkspaceRole(ctx, request, request.params.workspaceId, 'admin');
      await removeSuppression(ctx, workspace._id, request.params.address, ctx.now(), { kind: 'user', userId: principal.user._id }, originOfRequest(request.id));
      return { deleted: true, address: normalizeSuppressedAddress(request.params.address, 'path.address') };
    },
  );
}
