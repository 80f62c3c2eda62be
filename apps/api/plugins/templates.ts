// Template endpoints (spec: "Template endpoints"): dashboard session, projectId on every call.
// Members read; writing needs a role above viewer. Checks run in the management API's order:
// Origin → session (401) → request validation (400) → membership and role (403) → the rest.
import type { FastifyInstance } from 'fastify';
import { createTemplate, deleteTemplate, getTemplate, listTemplates, templateSummaryView, templateView, updateTemplate } from '../../services/templates/templates.ts';
import { PREVIEW_RATE } from '../../../domain/rate-limits.ts';
import { sha256Hex } from '../../services/management/ids.ts';
import { previewTemplate } from '../../services/templates/preview.ts';
import { RelayError } from '../../../domain/errors.ts';
import { requireAccessStill, requireProjectAccess, requireSession, type ProjectAccess } from '../auth/session.ts';
import type { WorkspaceTemplates } from '../../../infra/rendering/template-threads.ts';
import { admitTemplateTest } from './emails.ts';
import { SendResult } from './email-responses.schemas.ts';
import type { ApiContext } from '../context.ts';
import { allowancesOf } from '../../../domain/usage/quota.ts';
import {
  DocumentedTemplateContentBody, DocumentedTemplatePreviewBody, DocumentedTemplateTestBody, DocumentedTemplateUpdateBody,
  ListTemplatesQuery, ProjectQuery, TemplateContentBody, TemplateIdParams, TemplatePreviewBody, TemplateTestBody, TemplateUpdateBody,
} from './templates.schemas.ts';
import { Template, TemplateDeleted, TemplateList, TemplatePreviewResult } from './template-responses.schemas.ts';

export const DEFAULT_TEMPLATE_PAGE = 50;

export async function templateRoutes(app: FastifyInstance, ctx: ApiContext): Promise<void> {
  app.addHook('onRequest', requireSession(ctx));

  /**
   * The workspace's template threads for a save: its compilation (which may wait for the
   * workspace's turn and run for seconds) is followed by a check of the caller's membership as
   * it is then, right before the save writes (the same 403 as the first check): a member removed
   * meanwhile saves nothing.
   */
  const checkedAfterCompiling = (access: ProjectAccess): WorkspaceTemplates => {
    const threads = ctx.services.templates.of(access.project.workspaceId);
    return {
      ...threads,
      async compile(source, prefix) {
        const compiled = await threads.compile(source, prefix);
        await requireAccessStill(ctx, access, 'write');
        return compiled;
      },
    };
  };

  app.get<{ Querystring: ListTemplatesQuery }>('/v1/templates', {
    schema: { querystring: ListTemplatesQuery },
    config: { openapi: { responses: { 200: { description: 'A page of the project\'s templates.', schema: TemplateList } } } },
  }, async (request) => {
    const { project } = await requireProjectAccess(ctx, request, request.query.projectId, 'read');
    const page = await listTemplates(ctx.documents, project._id, { limit: request.query.limit ?? DEFAULT_TEMPLATE_PAGE, cursor: request.query.cursor });
    return { templates: page.templates.map(templateSummaryView), next_cursor: page.nextCursor };
  });

  app.post<{ Querystring: ProjectQuery; Body: TemplateContentBody }>(
    '/v1/templates',
    { schema: { querystring: ProjectQuery, body: TemplateContentBody }, config: { openapi: { body: DocumentedTemplateContentBody, responses: { 201: { description: 'Created.', schema: Template } } } } },
    async (request, reply) => {
      const access = await requireProjectAccess(ctx, request, request.query.projectId, 'write');
      const { project } = access;
      return reply.status(201).send(templateView(await createTemplate(ctx.documents, checkedAfterCompiling(access), project._id, request.body, ctx.now())));
    },
  );

  // Renders without writing anything, so readers may preview too; rate-limited per session.
  app.post<{ Querystring: ProjectQuery; Body: TemplatePreviewBody }>(
    '/v1/templates/preview',
    {
      schema: { querystring: ProjectQuery, body: TemplatePreviewBody },
      config: {
        openapi: {
          body: DocumentedTemplatePreviewBody,
          responses: { 200: { description: 'Rendered, nothing saved.', schema: TemplatePreviewResult } },
          failures: { 429: { description: 'rate_limit_exceeded: the session\'s previews of this 10-second window are used up.', headers: ['Retry-After'] } },
        },
      },
    },
    async (request) => {
      const { project, principal } = await requireProjectAccess(ctx, request, request.query.projectId, 'read');
      // Per session, whatever the project: 429 with Retry-After beyond PREVIEW_RATE.
      await ctx.services.rateLimits.reserveIn([{ policy: PREVIEW_RATE, scope: `preview:${sha256Hex(principal.session._id)}` }], ctx.now());
      return previewTemplate(ctx.services.templates.of(project.workspaceId), request.body);
    },
  );

  app.get<{ Querystring: ProjectQuery; Params: TemplateIdParams }>(
    '/v1/templates/:id',
    { schema: { querystring: ProjectQuery, params: TemplateIdParams }, config: { openapi: { responses: { 200: { description: 'The template.', schema: Template } } } } },
    async (request) => {
      const { project } = await requireProjectAccess(ctx, request, request.query.projectId, 'read');
      return templateView(await getTemplate(ctx.documents, project._id, request.params.id));
    },
  );

  app.patch<{ Querystring: ProjectQuery; Params: TemplateIdParams; Body: TemplateUpdateBody }>(
    '/v1/templates/:id',
    { schema: { querystring: ProjectQuery, params: TemplateIdParams, body: TemplateUpdateBody }, config: { openapi: { body: DocumentedTemplateUpdateBody, responses: { 200: { description: 'Updated.', schema: Template } } } } },
    async (request) => {
      const access = await requireProjectAccess(ctx, request, request.query.projectId, 'write');
      const { project } = access;
      return templateView(await updateTemplate(ctx.documents, checkedAfterCompiling(access), project._id, request.params.id, request.body, ctx.now()));
    },
  );

  // "Send a test" (dashboard): the saved template to one address, as a template send of the
  // project made by the member; every rule of POST /v1/emails applies (sender domain, the
  // development recipients, suppressions, rate limits, allowances).
  app.post<{ Querystring: ProjectQuery; Params: TemplateIdParams; Body: TemplateTestBody }>(
    '/v1/templates/:id/test',
    {
      schema: { querystring: ProjectQuery, params: TemplateIdParams, body: TemplateTestBody },
      config: {
        openapi: {
          summary: 'Sends the saved template to one address as a template send of the project (write roles).',
          body: DocumentedTemplateTestBody,
          responses: { 202: { description: 'Admitted, as POST /v1/emails answers.', schema: SendResult } },
          failures: { 429: { description: 'rate_limit_exceeded (with Retry-After) or quota_exceeded (the monthly allowance is used up until the next UTC month).', headers: ['Retry-After'] } },
        },
      },
    },
    async (request, reply) => {
      const { project, workspace, principal } = await requireProjectAccess(ctx, request, request.query.projectId, 'write');
      const template = await getTemplate(ctx.documents, project._id, request.params.id);
      if (project.environment === 'production' && !workspace.activated) {
        throw new RelayError('production_not_enabled', 'production sends work once the workspace is activated by an administrator');
      }
      const { from, to, variables } = request.body;
      const admission = await admitTemplateTest(ctx, {
        keyId: principal.user._id, projectId: project._id, workspaceId: project.workspaceId, environment: project.environment,
        allowances: allowancesOf(workspace.allowances),
      }, { from, to, template: template.slug, ...(variables === undefined ? {} : { variables }) }, request.id);
      // Named on the request line, as a send's is (apps/api/server.ts).
      request.admittedEmailId = admission.id;
      request.admittedFor = { workspaceId: project.workspaceId, projectId: project._id };
      return reply.status(202).send({
        id: admission.id, status: admission.status, test_mode: admission.testMode, ...(admission.reason !== null ? { reason: admission.reason } : {}),
      });
    },
  );

  app.delete<{ Querystring: ProjectQuery; Params: TemplateIdParams }>(
    '/v1/templates/:id',
    { schema: { querystring: ProjectQuery, params: TemplateIdParams }, config: { openapi: { responses: { 200: { description: 'Deleted.', schema: TemplateDeleted } } } } },
    async (request) => {
      const { project } = await requireProjectAccess(ctx, request, request.query.projectId, 'write');
      await deleteTemplate(ctx.documents, project._id, request.params.id);
      return { deleted: true };
    },
  );
}
