// API keys of a project. The secret is in the create response and nowhere else, ever. The list
// shows every live key and pages the revoked ones (apps/services/management/api-keys.ts).
import type { FastifyInstance } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import { notFound } from '../../../domain/errors.ts';
import { apiKeysOf, apiKeyView, createApiKey, listApiKeys, revokeApiKey } from '../../services/management/api-keys.ts';
import { requireAccessStill, requireProjectAccess, requireSession } from '../auth/session.ts';
import type { ApiContext } from '../context.ts';
import { showsSecret } from '../secret-answers.ts';
import { ApiKey, ApiKeyList, CreatedApiKey, Id, Name, Permission } from './management-schemas.ts';
import { NoQuery } from './query.schemas.ts';

const CreateKey = Type.Object(
  { name: Name, permissions: Type.Array(Permission, { minItems: 1, maxItems: 2, uniqueItems: true }) },
  { additionalProperties: false },
);
const ByProject = Type.Object({ projectId: Id });
const ListKeysQuery = Type.Object({
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, errorMessage: 'must be an integer from 1 to 100' })),
  cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 64, pattern: '^[a-zA-Z0-9_-]+$', errorMessage: 'must be an API key id' })),
}, { additionalProperties: false });
const ById = Type.Object({ id: Id });

/** Revoked keys in a page of the list when the query names no limit. */
export const DEFAULT_REVOKED_KEYS_PAGE = 50;

export async function apiKeyRoutes(app: FastifyInstance, ctx: ApiContext): Promise<void> {
  app.addHook('onRequest', requireSession(ctx));

  app.post<{ Params: Static<typeof ByProject>; Body: Static<typeof CreateKey> }>(
    '/v1/projects/:projectId/api-keys',
    {
      schema: { params: ByProject, querystring: NoQuery, body: CreateKey },
      config: { openapi: { responses: { 201: { description: 'Created, with its secret (shown this once).', schema: CreatedApiKey } } } },
    },
    async (request, reply) => {
      const access = await requireProjectAccess(ctx, request, request.params.projectId, 'write');
      const { key, secret } = await createApiKey(ctx.documents, { project: access.project, ...request.body }, ctx.now());
      // A member removed (or made a viewer) while the key was being made gets no key: checked
      // again once it is stored, it is revoked and its secret never leaves, so no key outlives a
      // removal already answered. (Checked before the insert instead, a removal in between
      // would leave a working key made for someone who is no member.)
      try {
        await requireAccessStill(ctx, access, 'write');
      } catch (error) {
        await revokeApiKey(ctx.documents, key._id, ctx.now());
        throw error;
      }
      return showsSecret(reply).status(201).send({ ...apiKeyView(key), secret });
    },
  );

  app.get<{ Params: Static<typeof ByProject>; Querystring: Static<typeof ListKeysQuery> }>(
    '/v1/projects/:projectId/api-keys',
    {
      schema: { params: ByProject, querystring: ListKeysQuery },
      config: { openapi: { responses: { 200: { description: 'The live keys and a page of the revoked ones.', schema: ApiKeyList } } } },
    },
    async (request) => {
      const { project } = await requireProjectAccess(ctx, request, request.params.projectId, 'read');
      const page = await listApiKeys(ctx.documents, project._id, { limit: request.query.limit ?? DEFAULT_REVOKED_KEYS_PAGE, cursor: request.query.cursor });
      return { apiKeys: page.keys.map(apiKeyView), next_cursor: page.nextCursor };
    },
  );

  app.delete<{ Params: Static<typeof ById> }>('/v1/api-keys/:id', {
    schema: { params: ById, querystring: NoQuery },
    config: { openapi: { responses: { 200: { description: 'Revoked (again: the same answer).', schema: ApiKey } } } },
  }, async (request) => {
    const key = await apiKeysOf(ctx.documents).get(request.params.id);
    if (!key) throw notFound(`API key ${request.params.id} not found`);
    await requireProjectAccess(ctx, request, key.projectId, 'write');
    return apiKeyView(await revokeApiKey(ctx.documents, key._id, ctx.now()));
  });
}
