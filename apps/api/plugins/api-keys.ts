// API keys of a project. The secret is in the create response and nowhere else, ever.
import type { FastifyInstance } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import { notFound } from '../../../domain/errors.ts';
import { apiKeysOf, apiKeyView, createApiKey, listApiKeys, revokeApiKey } from '../../services/management/api-keys.ts';
import { requireProjectAccess, requireSession } from '../auth/session.ts';
import type { ApiContext } from '../context.ts';
import { showsSecret } from '../secret-answers.ts';
import { Id, Name, Permission } from './management-schemas.ts';
import { NoQuery } from './query.schemas.ts';

const CreateKey = Type.Object(
  { name: Name, permissions: Type.Array(Permission, { minItems: 1, maxItems: 2, uniqueItems: true }) },
  { additionalProperties: false },
);
const ByProject = Type.Object({ projectId: Id });
const ById = Type.Object({ id: Id });

export async function apiKeyRoutes(app: FastifyInstance, ctx: ApiContext): Promise<void> {
  app.addHook('onRequest', requireSession(ctx));

  app.post<{ Params: Static<typeof ByProject>; Body: Static<typeof CreateKey> }>(
    '/v1/projects/:projectId/api-keys',
    { schema: { params: ByProject, querystring: NoQuery, body: CreateKey } },
    async (request, reply) => {
      const { project } = await requireProjectAccess(ctx, request, request.params.projectId, 'write');
      const { key, secret } = await createApiKey(ctx.documents, { project, ...request.body }, ctx.now());
      return showsSecret(reply).status(201).send({ ...apiKeyView(key), secret });
    },
  );

  app.get<{ Params: Static<typeof ByProject> }>('/v1/projects/:projectId/api-keys', { schema: { params: ByProject, querystring: NoQuery } }, async (request) => {
    const { project } = await requireProjectAccess(ctx, request, request.params.projectId, 'read');
    return { apiKeys: (await listApiKeys(ctx.documents, project._id)).map(apiKeyView) };
  });

  app.delete<{ Params: Static<typeof ById> }>('/v1/api-keys/:id', { schema: { params: ById, querystring: NoQuery } }, async (request) => {
    const key = await apiKeysOf(ctx.documents).get(request.params.id);
    if (!key) throw notFound(`API key ${request.params.id} not found`);
    await requireProjectAccess(ctx, request, key.projectId, 'write');
    return apiKeyView(await revokeApiKey(ctx.documents, key._id, ctx.now()));
  });
}
