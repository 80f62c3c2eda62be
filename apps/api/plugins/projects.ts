// Projects of a workspace. Reading needs membership; creating needs a write role.
import type { FastifyInstance } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import { createProject, listProjects, projectView } from '../../services/management/projects.ts';
import { requireProjectAccess, requireSession, requireWorkspaceAccess } from '../auth/session.ts';
import type { ApiContext } from '../context.ts';
import { Environment, Id, Name, Project, ProjectList } from './management-schemas.ts';
import { NoQuery } from './query.schemas.ts';

const CreateProject = Type.Object({ name: Name, environment: Environment }, { additionalProperties: false });
const ByWorkspace = Type.Object({ workspaceId: Id });
const ById = Type.Object({ id: Id });

export async function projectRoutes(app: FastifyInstance, ctx: ApiContext): Promise<void> {
  app.addHook('onRequest', requireSession(ctx));

  app.post<{ Params: Static<typeof ByWorkspace>; Body: Static<typeof CreateProject> }>(
    '/v1/workspaces/:workspaceId/projects',
    {
      schema: { params: ByWorkspace, querystring: NoQuery, body: CreateProject },
      config: { openapi: { responses: { 201: { description: 'Created.', schema: Project } } } },
    },
    async (request, reply) => {
      const { workspace } = await requireWorkspaceAccess(ctx, request, request.params.workspaceId, 'write');
      const project = await createProject(ctx.documents, { workspaceId: workspace._id, ...request.body }, ctx.now());
      return reply.status(201).send(projectView(project));
    },
  );

  app.get<{ Params: Static<typeof ByWorkspace> }>('/v1/workspaces/:workspaceId/projects', {
    schema: { params: ByWorkspace, querystring: NoQuery },
    config: { openapi: { responses: { 200: { description: 'The workspace\'s projects.', schema: ProjectList } } } },
  }, async (request) => {
    const { workspace } = await requireWorkspaceAccess(ctx, request, request.params.workspaceId, 'read');
    return { projects: (await listProjects(ctx.documents, workspace._id)).map(projectView) };
  });

  app.get<{ Params: Static<typeof ById> }>('/v1/projects/:id', {
    schema: { params: ById, querystring: NoQuery },
    config: { openapi: { responses: { 200: { description: 'The project.', schema: Project } } } },
  }, async (request) => {
    const { project } = await requireProjectAccess(ctx, request, request.params.id, 'read');
    return projectView(project);
  });
}
