// A workspace's suppression list: every member reads it, owners and admins change it.
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { Socket } from 'node:net';
import { Readable } from 'node:stream';
import { originOfRequest } from '../../../domain/events/metadata.ts';
import { Type, type Static } from '@sinclair/typebox';
import type { SuppressionEntry } from '../../../domain/management.ts';
import { addSuppression, listSuppressions, removeSuppression, suppressionCursor, suppressionPages, suppressionView } from '../../services/management/suppressions.ts';
import { requireSession, requireWorkspaceAccess, requireWorkspaceRole } from '../auth/session.ts';
import type { ApiContext } from '../context.ts';
import { NoQuery } from './query.schemas.ts';
import { Address, Id, Suppression, SuppressionList, SuppressionRemoved } from './management-schemas.ts';

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
const CSV_HEADER = 'address,reason,email_id,created_at\r\n';
const csvLine = (entry: SuppressionEntry) => `${[entry.address, entry.reason, entry.emailId ?? '', entry.createdAt].map(csvField).join(',')}\r\n`;
/** Entries per read of the store, and so per chunk of the export: about 40 KB of CSV. */
const EXPORT_PAGE = 500;

/** Ends the connection with a TCP reset, once what the response holds (it may be corked for this tick) is handed to the kernel. */
function resetConnection(socket: Socket | undefined): void {
  // A request injected in tests has no connection of its own: the stream's error ends it.
  if (!(socket instanceof Socket)) return;
  while (socket.writableCorked) socket.uncork();
  socket.resetAndDestroy();
}

/**
 * The export as a byte stream that pulls the next page only when its consumer wants more (a
 * client that stops reading stops the reads; one that goes away destroys the stream, which ends
 * the reads). The status is sent with the first chunk: a later failure of the store can only cut
 * the response short, so it is logged and the connection reset. A plain close would not do: over
 * HTTP/1.0 (no chunked encoding; what nginx speaks to its upstreams by default) the end of the
 * connection is the end of the body, so a list cut at a page boundary would arrive as a complete
 * 200. A reset is an error to any client or proxy, whatever the version.
 */
function csvExport(first: SuppressionEntry[], rest: AsyncIterable<SuppressionEntry[]>, log: FastifyBaseLogger, socket: Socket | undefined): Readable {
  async function* chunks() {
    yield CSV_HEADER + first.map(csvLine).join('');
    try {
      for await (const page of rest) yield page.map(csvLine).join('');
    } catch (error) {
      log.error({ err: error }, 'suppression export failed part-way: response cut short');
      resetConnection(socket);
      throw error;
    }
  }
  // Bytes, not objects: the stream's buffer is then bounded by size (about one page), not by count.
  return Readable.from(chunks(), { objectMode: false });
}

export async function suppressionRoutes(app: FastifyInstance, ctx: ApiContext): Promise<void> {
  app.addHook('onRequest', requireSession(ctx));

  app.get<{ Params: Static<typeof ByWorkspace>; Querystring: Static<typeof Page> }>(
    '/v1/workspaces/:workspaceId/suppressions',
    {
      schema: { params: ByWorkspace, querystring: Page },
      config: { openapi: { responses: { 200: { description: 'A page of the list, in address order.', schema: SuppressionList } } } },
    },
    async (request) => {
      const { workspace } = await requireWorkspaceAccess(ctx, request, request.params.workspaceId, 'read');
      const cursor = request.query.cursor === undefined ? undefined : suppressionCursor(request.query.cursor);
      const page = await listSuppressions(ctx.documents, workspace._id, { limit: request.query.limit ?? 50, cursor, prefix: request.query.prefix });
      return { suppressions: page.entries.map(suppressionView), next_cursor: page.nextCursor };
    },
  );

  // The whole list as CSV, in address order: a file people open in a spreadsheet or import elsewhere.
  // A list can hold millions of addresses, so it is streamed: a page is read when the client has
  // taken the one before (see csvExport).
  app.get<{ Params: Static<typeof ByWorkspace> }>(
    '/v1/workspaces/:workspaceId/suppressions/export',
    { schema: { params: ByWorkspace, querystring: NoQuery }, config: { openapi: { summary: 'Every suppression of the workspace as CSV (address, reason, email_id, created_at).', responses: { 200: { description: 'The list as CSV.', mediaType: 'text/csv' } } } } },
    async (request, reply) => {
      const { workspace } = await requireWorkspaceAccess(ctx, request, request.params.workspaceId, 'read');
      const csv = (body: Readable) => reply
        .type('text/csv; charset=utf-8')
        .header('content-disposition', `attachment; filename="suppressions-${workspace._id}.csv"`)
        .header('cache-control', 'private, no-store')
        .send(body);
      // fastify drains the stream of a HEAD answer to discard it: that would read the whole list for nothing.
      if (request.method === 'HEAD') return csv(Readable.from([]));
      const pages = suppressionPages(ctx.documents, workspace._id, EXPORT_PAGE);
      // Read before anything is sent, so that a store failing at once still gets its error answer.
      const first = await pages.next();
      return csv(csvExport(first.done ? [] : first.value, pages, request.log, request.raw.socket));
    },
  );

  app.post<{ Params: Static<typeof ByWorkspace>; Body: Static<typeof AddBody> }>(
    '/v1/workspaces/:workspaceId/suppressions',
    {
      schema: { params: ByWorkspace, querystring: NoQuery, body: AddBody },
      config: { openapi: { responses: { 201: { description: 'Added.', schema: Suppression } } } },
    },
    async (request, reply) => {
      const { workspace, principal } = await requireWorkspaceRole(ctx, request, request.params.workspaceId, 'admin');
      const entry = await addSuppression(ctx, workspace._id, request.body.address, ctx.now(), { kind: 'user', userId: principal.user._id }, originOfRequest(request.id));
      return reply.status(201).send(suppressionView(entry));
    },
  );

  app.delete<{ Params: Static<typeof ByAddress> }>(
    '/v1/workspaces/:workspaceId/suppressions/:address',
    {
      schema: { params: ByAddress, querystring: NoQuery },
      config: { openapi: { responses: { 200: { description: 'Removed: the address as the list keys it.', schema: SuppressionRemoved } } } },
    },
    async (request) => {
      const { workspace, principal } = await requireWorkspaceRole(ctx, request, request.params.workspaceId, 'admin');
      const address = await removeSuppression(ctx, workspace._id, request.params.address, ctx.now(), { kind: 'user', userId: principal.user._id }, originOfRequest(request.id));
      return { deleted: true, address };
    },
  );
}
