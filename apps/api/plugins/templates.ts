// Template endpoints (spec: "Template endpoints"): dashboard session, projectId on every call.
// Members read; writing needs a role above viewer. Checks run in the management API's order:
// Origin → session (401) → request validation (400) → membership and role (403) → the rest.
import type { FastifyInstance } from 'fastify';
import { createTemplate, deleteTemplate, getTemplate, listTemplates, templateSummaryView, templateView, updateTemplate } from '../../services/templates/templates.ts';
import { previewTemplate } from '../../services/templates/preview.ts';
import { requireProjectAccess, requireSession } from '../auth/session.ts';
import type { ApiContext } from '../context.ts';
import {
  ListTemplatesQuery, ProjectQuery, TemplateContentBody, TemplateIdParams, TemplatePreviewBody, TemplateUpdateBody,
} from './templates.schemas.ts';
import { Template, TemplateDeleted, TemplateList, TemplatePreviewResult } from './template-responses.schemas.ts';

export const DEFAULT_TEMPLATE_PAGE = 50;

export async function templateRoutes(app: FastifyInstance, ctx: ApiContext): Promise<void> {
  app.addHook('onRequest', requireSession(ctx));

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
    { schema: { querystring: ProjectQuery, body: TemplateContentBody }, config: { openapi: { responses: { 201: { description: 'Created.', schema: Template } } } } },
    async (request, reply) => {
      const { project } = await requireProjectAccess(ctx, request, request.query.projectId, 'write');
      return reply.status(201).send(templateView(await createTemplate(ctx.documents, project._id, request.body, ctx.now())));
    },
  );

  // Renders without writing anything, so readers may preview too.
  app.post<{ Querystring: ProjectQuery; Body: TemplatePreviewBody }>(
    '/v1/templates/preview',
    { schema: { querystring: ProjectQuery, body: TemplatePreviewBody }, config: { openapi: { responses: { 200: { description: 'Rendered, nothing saved.', schema: TemplatePreviewResult } } } } },
    async (request) => {
      await requireProjectAccess(ctx, request, request.query.projectId, 'read');
      return previewTemplate(request.body);
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
    { schema: { querystring: ProjectQuery, params: TemplateIdParams, body: TemplateUpdateBody }, config: { openapi: { responses: { 200: { description: 'Updated.', schema: Template } } } } },
    async (request) => {
      const { project } = await requireProjectAccess(ctx, request, request.query.projectId, 'write');
      return templateView(await updateTemplate(ctx.documents, project._id, request.params.id, request.body, ctx.now()));
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
