// This month's usage of a workspace against its monthly allowances (spec: Limits): recipients
// charged to the workspace, and to each development key. A member's dashboard test sends are
// shown as up to two rows, their development test sends against the development allowance
// (which applies to those alone) and their production ones. Members read.
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
    apiKeyId: Type.String({ description: 'The key charged, or the member (usr_…) whose dashboard test sends were charged: a row for their development test sends, another for their production ones.' }),
    name: Type.String(),
    projectId: Type.Union([Type.String(), Type.Null()]),
    environment: Type.Union([Type.Literal('development'), Type.Literal('production'), Type.Null()]),
    used: Type.Integer(),
    limit: Type.Union([Type.Integer(), Type.Null()], { description: 'The development allowance of a development key, or of a member\'s development test sends; null when only the workspace\'s applies.' }),
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
        return [{
          apiKeyId, name: key.name, projectId: key.projectId, environment: key.environment, used,
          limit: key.environment === 'development' ? allowances.developmentKeyRecipients : null,
        }];
      }
      // A member (or a key since deleted): its charges say which were development sends.
      const user = await usersOf(ctx.documents).get(apiKeyId);
      const name = user ? `Test sends of ${user.email}` : apiKeyId;
      const development = usage.developmentByKey[apiKeyId] ?? 0;
      return [
        { apiKeyId, name, projectId: null, environment: 'development' as const, used: development, limit: allowances.developmentKeyRecipients },
        { apiKeyId, name, projectId: null, environment: 'production' as const, used: used - development, limit: null },
      ].filter((row) => row.used > 0);
    }));
    return {
      month,
      resetsAt: monthEnd(month).toISOString(),
      recipients: { used: usage.workspaceRecipients, limit: allowances.workspaceRecipients },
      keys: keys.flat().sort((a, b) => b.used - a.used),
    };
  });
}
