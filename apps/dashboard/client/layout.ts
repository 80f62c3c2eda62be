// The frame around every signed-in page: a skip link, the workspace and project switcher, the
// signed-in user with sign-out, pending invitations, and the navigation built from ROUTES.
import { api, ApiError, get } from './api.ts';
import { lastProject, type PageContext } from './context.ts';
import { actionButton, h, select } from './dom.ts';
import { pathOf, ROUTES, type Route } from './routes.ts';

/** Only an answer that the session has ended leads to sign-in: after any other the reader is still signed in, and is told so. */
async function signOut(): Promise<void> {
  try {
    await api('DELETE', '/v1/session');
  } catch (error) {
    // Ended already (elsewhere): signed out, as asked.
    if (!(error instanceof ApiError && error.code === 'session_required')) {
      throw new Error(`Signing out failed, so you are still signed in: ${(error as Error).message}`);
    }
  }
  location.assign('/sign-in');
}

/**
 * A switcher goes when its button is pressed, never when its select changes: in Chromium an arrow
 * key on a closed select changes it (and fires "change") at once, which would leave the page for
 * the first workspace or project passed.
 */
function switchControl(label: string, control: HTMLSelectElement, go: () => void): HTMLElement {
  return h('div', { class: 'switch' },
    h('label', { for: control.id }, label),
    control,
    h('button', { type: 'button', class: 'secondary small', 'aria-label': `Switch ${label.toLowerCase()}`, onclick: go }, 'Switch'));
}

function switcher(ctx: PageContext, route: Route): HTMLElement | null {
  const session = ctx.session!;
  if (session.memberships.length === 0) return null;
  const workspaces = select('workspace', session.memberships.map((m) => [m.workspaceId, m.workspaceName]), ctx.workspace?.workspaceId ?? null, { id: 'switch-workspace' });
  const parts: HTMLElement[] = [switchControl('Workspace', workspaces, () => location.assign(`/workspaces/${workspaces.value}`))];
  if (ctx.workspace && ctx.projects.length > 0) {
    const projects = select('project', ctx.projects.map((p) => [p.id, `${p.name} (${p.environment})`]), ctx.project?.id ?? null, { id: 'switch-project' });
    parts.push(switchControl('Project', projects, () => {
      const projectId = projects.value;
      lastProject.set(ctx.workspace!.workspaceId, projectId);
      // The same section of the other project; a workspace page stays where it is.
      const section = route.scope === 'project' ? ROUTES.find((r) => r.nav === (route.nav ?? route.section))! : route;
      location.assign(pathOf(section.path, { ...ctx.params, projectId }));
    }));
  }
  return h('div', { class: 'switcher' }, parts);
}

function navigation(ctx: PageContext, route: Route): HTMLElement | null {
  if (!ctx.workspace) return null;
  const current = route.nav ?? route.section;
  const params = { workspaceId: ctx.workspace.workspaceId, projectId: ctx.project?.id ?? '' };
  const entries = ROUTES.filter((r) => r.nav && (r.scope === 'workspace' || (r.scope === 'project' && ctx.project)));
  const group = (scope: 'project' | 'workspace', label: string) => {
    const items = entries.filter((r) => r.scope === scope);
    if (items.length === 0) return null;
    return h('div', { class: 'nav-group' },
      h('p', { class: 'nav-label', 'aria-hidden': 'true' }, label),
      h('ul', { 'aria-label': label }, items.map((r) => h('li', null,
        h('a', { href: pathOf(r.path, params), 'aria-current': r.nav === current ? 'page' : null }, r.nav!)))));
  };
  return h('nav', { 'aria-label': 'Sections' },
    group('project', ctx.project ? `Project ${ctx.project.name}` : 'Project'),
    group('workspace', `Workspace ${ctx.workspace.workspaceName}`));
}

export async function layout(ctx: PageContext, route: Route): Promise<HTMLElement[]> {
  const session = ctx.session!;
  const { invitations } = await get<{ invitations: unknown[] }>('/v1/invitations');
  const status = h('div', { class: 'top-status' });
  const header = h('header', { class: 'top' },
    h('a', { class: 'skip', href: '#main' }, 'Skip to content'),
    h('a', { class: 'brand', href: '/' }, 'Relay'),
    switcher(ctx, route),
    h('div', { class: 'account' },
      invitations.length > 0 ? h('a', { href: '/invitations', class: 'invitations-link' }, `Invitations (${invitations.length})`) : null,
      h('span', { class: 'user' }, session.user.email),
      h('span', { class: 'role' }, ctx.workspace ? ctx.workspace.role : null),
      actionButton('Sign out', { class: 'secondary small' }, { status }, signOut)));
  return [header, status, h('div', { class: 'body' }, navigation(ctx, route), ctx.main)];
}
