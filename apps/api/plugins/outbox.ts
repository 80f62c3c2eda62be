// The outbox (RELAY_DELIVERY=outbox, the embedded default) for the dashboard: the messages a
// project's emails became, byte for byte as they would have gone on the wire. Members read.
import type { FastifyInstance } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import { notFound } from '../../../domain/errors.ts';
import { outboxMessage, outboxMessages } from '../../services/outbox.ts';
import { requireProjectAccess, requireSession } from '../auth/session.ts';
import type { ApiContext } from '../context.ts';
import { Id } from './management-schemas.ts';

const ByProject = Type.Object({ projectId: Id });
const ByEmail = Type.Object({ projectId: Id, emailId: Id });
const Page = Type.Object({ limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })) }, { additionalProperties: false });

export async function outboxRoutes(app: FastifyInstance, ctx: ApiContext): Promise<void> {
  app.addHook('onRequest', requireSession(ctx));

  app.get<{ Params: Static<typeof ByProject>; Querystring: Static<typeof Page> }>(
    '/v1/projects/:projectId/outbox',
    { schema: { params: ByProject, querystring: Page } },
    async (request) => {
      const { project } = await requireProjectAccess(ctx, request, request.params.projectId, 'read');
      const messages = await outboxMessages(ctx.documents, ctx.services.outboxDir, { projectId: project._id, limit: request.query.limit ?? 50 });
      return { transport: ctx.config.delivery, messages };
    },
  );

  app.get<{ Params: Static<typeof ByEmail> }>(
    '/v1/projects/:projectId/outbox/:emailId',
    { schema: { params: ByEmail }, config: { openapi: { responses: { 200: { description: 'The message exactly as written (.eml, DKIM-signed).', mediaType: 'message/rfc822' } } } } },
    async (request, reply) => {
      const { project } = await requireProjectAccess(ctx, request, request.params.projectId, 'read');
      const raw = await outboxMessage(ctx.documents, ctx.services.outboxDir, request.params.emailId, project._id);
      if (!raw) throw notFound(`no outbox message for email ${request.params.emailId} in this project`);
      return reply.type('message/rfc822').send(raw);
    },
  );
}
