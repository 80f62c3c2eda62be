// The outbox (RELAY_DELIVERY=outbox, the embedded default) for the dashboard: the messages a
// project's emails became, byte for byte as they would have gone on the wire. Members read.
import type { FastifyInstance } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import { notFound, RelayError } from '../../../domain/errors.ts';
import { outboxMessage, projectOutboxMessages } from '../../services/outbox.ts';
import { requireProjectAccess, requireSession } from '../auth/session.ts';
import type { ApiContext } from '../context.ts';
import { NoQuery } from './query.schemas.ts';
import { Id, OutboxList } from './management-schemas.ts';

const ByProject = Type.Object({ projectId: Id });
const ByEmail = Type.Object({ projectId: Id, emailId: Id });
const Page = Type.Object({ limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })) }, { additionalProperties: false });

export async function outboxRoutes(app: FastifyInstance, ctx: ApiContext): Promise<void> {
  app.addHook('onRequest', requireSession(ctx));

  app.get<{ Params: Static<typeof ByProject>; Querystring: Static<typeof Page> }>(
    '/v1/projects/:projectId/outbox',
    {
      schema: { params: ByProject, querystring: Page },
      config: { openapi: { responses: { 200: { description: 'The project\'s outbox copies of the last seven days.', schema: OutboxList } } } },
    },
    async (request) => {
      const { project } = await requireProjectAccess(ctx, request, request.params.projectId, 'read');
      const messages = await projectOutboxMessages(ctx.documents, ctx.services.outboxDir, project._id, { limit: request.query.limit ?? 50, now: ctx.now() });
      return { transport: ctx.config.delivery, messages };
    },
  );

  app.get<{ Params: Static<typeof ByEmail>; Querystring: Static<typeof NoQuery> }>(
    '/v1/projects/:projectId/outbox/:emailId',
    {
      schema: { params: ByEmail, querystring: NoQuery },
      config: { openapi: { responses: { 200: { description: 'The message exactly as written (.eml, DKIM-signed), as an attachment; 410 content_expired past body retention.', mediaType: 'message/rfc822' } } } },
    },
    async (request, reply) => {
      const { project } = await requireProjectAccess(ctx, request, request.params.projectId, 'read');
      const { emailId } = request.params;
      const copy = await outboxMessage(ctx.documents, ctx.services.outboxDir, emailId, ctx.now(), project._id);
      if (copy === 'expired') throw new RelayError('content_expired', `the content of email ${emailId} has expired (bodies are kept for seven days) and its outbox copy is deleted`);
      if (copy === 'missing') throw notFound(`no outbox message for email ${emailId} in this project`);
      // A message is the sender's HTML, not ours: a browser must save it, never render or sniff it on this origin.
      return reply
        .type('message/rfc822')
        .header('x-content-type-options', 'nosniff')
        .header('content-disposition', `attachment; filename="${emailId}.eml"`)
        .send(copy.found);
    },
  );
}
