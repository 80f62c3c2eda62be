// The dashboard's entry: sends a browser that arrived on another address of this server to
// the dashboard's origin (where its sign-in is allowed), finds the page of the address, checks
// the session, and draws the layout and the page.
import { ApiError, get, keepPageWhenAccessEnds, keepPageWhenSessionEnds } from './api.ts';
import { lastProject, readSettings, type Capabilities, type Membership, type PageContext, type Project, type SessionInfo } from './context.ts';
import { fill, h, notice, sessionNotice } from './dom.ts';
import { layout } from './layout.ts';
import { match, pathOf, ROUTES } from './routes.ts';

const NONE: Capabilities = { write: false, suppressions: false, grants: [] };

async function start(): Promise<void> {
  const settings = readSettings();
  // Compared in the browser, which knows the address it is really on: behind a proxy the
  // server may see another Host, and a redirect decided there could loop.
  if (location.origin !== settings.dashboardOrigin) {
    location.replace(settings.dashboardOrigin + location.pathname + location.search + location.hash);
    return;
  }
  const app = document.getElementById('app')!;
  if (location.pathname === '/' || /^\/workspaces\/[^/]+\/?$/.test(location.pathname)) return home();

  const found = match(location.pathname);
  const main = h('main', { id: 'main', tabindex: -1 });
  const heading = h('h1');
  const ctx: PageContext = {
    params: found?.params ?? {}, query: new URLSearchParams(location.search), settings,
    session: null, workspace: null, project: null, projects: [], can: NONE, main,
    title(text) {
      heading.textContent = text;
      document.title = `${text} · Relay`;
    },
  };
  main.append(heading);
  if (!found) {
    fill(app, main);
    ctx.title('Page not found');
    main.append(h('p', null, 'There is no page at this address. ', h('a', { href: '/' }, 'Go to the dashboard')));
    return;
  }
  if (found.route.scope === 'public') {
    fill(app, h('div', { class: 'public' }, main));
    return (await found.route.load()).render(ctx);
  }

  const session = await get<SessionInfo>('/v1/session');
  ctx.session = session;
  if (found.route.scope === 'project') {
    ctx.project = await get<Project>(`/v1/projects/${found.params.projectId}`);
    found.params.workspaceId = ctx.project.workspaceId;
    lastProject.set(ctx.project.workspaceId, ctx.project.id);
  }
  if (found.route.scope === 'workspace' || found.route.scope === 'project') {
    const workspaceId = found.params.workspaceId;
    ctx.workspace = session.memberships.find((m) => m.workspaceId === workspaceId) ?? null;
    if (!ctx.workspace) throw new ApiError(403, 'forbidden', `you are not a member of workspace ${workspaceId}`, null);
    ctx.projects = (await get<{ projects: Project[] }>(`/v1/workspaces/${workspaceId}/projects`)).projects;
    ctx.project ??= ctx.projects.find((p) => p.id === lastProject.get(workspaceId)) ?? ctx.projects[0] ?? null;
    ctx.can = settings.roles[ctx.workspace.role];
  }
  const notices = sessionNotice(ctx.workspace?.workspaceName ?? null);
  fill(app, notices.element, ...await layout(ctx, found.route));
  await (await found.route.load()).render(ctx);
  // Drawn: from here on the reader may have typed something, which going to sign-in would lose.
  keepPageWhenSessionEnds(notices);
  // And the page stays when the reader is removed from its workspace, saying so.
  if (ctx.workspace) keepPageWhenAccessEnds(notices);
}

/** "/" and "/workspaces/:id": the emails of the project last used, else the first there is. */
async function home(): Promise<void> {
  const session = await get<SessionInfo>('/v1/session');
  const wanted = /^\/workspaces\/([^/]+)/.exec(location.pathname)?.[1];
  const workspace: Membership | undefined = session.memberships.find((m) => m.workspaceId === wanted) ?? session.memberships[0];
  if (!workspace) return location.replace('/invitations');
  const { projects } = await get<{ projects: Project[] }>(`/v1/workspaces/${workspace.workspaceId}/projects`);
  const project = projects.find((p) => p.id === lastProject.get(workspace.workspaceId)) ?? projects[0];
  location.replace(project
    ? pathOf(ROUTES.find((r) => r.nav === 'Emails')!.path, { projectId: project.id })
    : `/workspaces/${workspace.workspaceId}/projects`);
}

start().catch((error: unknown) => {
  // request() has already sent the reader to sign in.
  if (error instanceof ApiError && error.code === 'session_required') return;
  const app = document.getElementById('app')!;
  const text = error instanceof ApiError ? error.message : 'The page could not be drawn. Reload to try again.';
  fill(app, h('main', { id: 'main' }, h('h1', null, 'Something went wrong'), notice('error', text), h('p', null, h('a', { href: '/' }, 'Go to the dashboard'))));
  document.title = 'Error · Relay';
  if (!(error instanceof ApiError)) console.error(error);
});
