// The workspace's projects, and a new one (write roles). A project's environment never
// changes: development keys send only to the project's verified domains.
import { api } from '../api.ts';
import type { PageContext, Project } from '../context.ts';
import { field, form, h, maxCharacters, section, select, table, value, when } from '../dom.ts';

export async function render(ctx: PageContext): Promise<void> {
  ctx.title('Projects');
  const workspaceId = ctx.workspace!.workspaceId;
  ctx.main.append(table('Projects', ['Name', 'Environment', 'Created'], ctx.projects.map((project) => [
    h('a', { href: `/projects/${project.id}/emails` }, project.name),
    project.environment,
    when(project.createdAt),
  ]), 'This workspace has no project yet.'));
  if (!ctx.can.write) return;
  ctx.main.append(section('New project', form({ 'aria-label': 'New project' }, [
    field('Name', h('input', { name: 'name', required: true, maxlength: maxCharacters(100) })),
    field('Environment', select('environment', [['development', 'development'], ['production', 'production']], 'development'),
      'Development keys send only to this project\'s verified domains; production needs the workspace activated by the operator.'),
    h('button', { type: 'submit' }, 'Create project'),
  ], async (element) => {
    const project = await api<Project>('POST', `/v1/workspaces/${workspaceId}/projects`, { name: value(element, 'name'), environment: value(element, 'environment') });
    location.assign(`/projects/${project.id}/emails`);
  })));
}
