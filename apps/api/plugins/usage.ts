// This month's usage of a workspace against its monthly allowances (spec: Limits): recipients
// charged to the workspace, and to each development key. Members read.
import type { FastifyInstance } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import { allowancesOf, monthEnd, monthOf } from '../../../domain/usage/quota.ts';
import { apiKeysOf } from '../../services/management/api-keys.ts';
import { usersOf } from '../../services/management/users.ts';
import { requireSession, requireWorkspaceAccess } from '../auth/session.ts';
import type { ApiContext } from '../context.ts';
import { Id } from './management-schemas.ts';
import { NoQuery } from './query.schemas.ts';

const ByWorkspace = Type.Object({ workspaceId: Id });
const Count = Type.Object({ used: Type.Integer(), limit: Type.Integer() }, { additionalProperties: false });
const Usage = Type.Object({
  month: Type.String({ description: 'UTC month, YYYY-MM.' }),
  resetsAt: Type.String({ format: 'date-time' }),
  recipients: Count,
  keys: Type.Array(Type.Object({
    apiKeyId: Type.String({ description: 'The key charged, or the member (usr_…) whose dashboard test sends were charged.' }),
    name: Type.String(),
    projectId: Type.Union([Type.String(), Type.Null()]),
    environment: Type.Union([Type.Literal('development'), Type.Literal('production'), Type.Null()]),
    used: Type.Integer(),
    limit: Type.Union([Type.Integer(), Type.Null()], { description: 'A development key\'s own monthly allowance; null when only the workspace\'s applies.' }),
  }, { additionalProperties: false }), { description: 'Recipients charged this month by key, most first.' }),
}, { additionalProperties: false });

export async function usageRoutes(app: FastifyInstance, ctx: ApiContext): Promise<void> {
  app.addHook('onRequest', requireSession(ctx));

  app.get<{ Params: Static<typeof ByWorkspace> }>('/v1/workspaces/:workspaceId/usage', {
    schema: { params: ByWorkspace, querystring: NoQuery },
    config: { openapi: { summary: 'This month\'s accepted recipients against the monthly allowances (members).', responses: { 200: { description: 'The month\'s usage.', schema: Usage } } } },
  }, async (request) => {
    const { workspace } = await requireWorkspaceAccess(ctx, request, request.params.workspaceId, 'read');
    const now = ctx.now();
    const usage = await ctx.services.usage.usage(workspace._id, now);
    // The workspace's own allowances when its operator set them (relay workspace quota), else the spec's.
    const allowances = allowancesOf(workspace.allowances);
    const month = monthOf(now);
    const keys = await Promise.all(Object.entries(usage.byKey).map(async ([apiKeyId, used]) => {
      const key = await apiKeysOf(ctx.documents).get(apiKeyId);
      if (key) {
        return {
          apiKeyId, name: key.name, projectId: key.projectId, environment: key.environment, used,
          limit: key.environment === 'development' ? allowances.developmentKeyRecipients : null,
        };
      }
      const user = await usersOf(ctx.documents).get(apiKeyId);
      return { apiKeyId, name: user ? `Test sends of ${user.email}` : apiKeyId, projectId: null, environment: null, used, limit: null };
    }));
    return {
      month,
      resetsAt: monthEnd(month).toISOString(),
      recipients: { used: usage.workspaceRecipients, limit: allowances.workspaceRecipients },
      keys: keys.sort((a, b) => b.used - a.used),
    };
  });
}
