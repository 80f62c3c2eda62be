// Every page of the dashboard: its address, what it is about (the signed-in user, a workspace
// or a project), its entry in the navigation, and its module in pages/. Adding a page is one
// line here and one module (docs/dashboard.md). Plain data: the server reads it too, to serve
// the page shell at exactly these addresses (apps/dashboard/dashboard.ts).

export type Scope = 'public' | 'user' | 'workspace' | 'project';

export interface PageEntry {
  /** ":name" segments become ctx.params.name. */
  path: string;
  scope: Scope;
  /** Shown in the navigation under this label. */
  nav?: string;
  /** For pages without an entry of their own: the entry they belong to (highlighted while they show). */
  section?: string;
  /** pages/<module>.ts draws it. */
  module: string;
}

export const PAGES: readonly PageEntry[] = [
  { path: '/sign-in', scope: 'public', module: 'sign-in' },
  { path: '/invitations', scope: 'user', module: 'invitations' },
  { path: '/projects/:projectId/emails', scope: 'project', nav: 'Emails', module: 'emails' },
  { path: '/workspaces/:workspaceId/projects', scope: 'workspace', nav: 'Projects', module: 'projects' },
];
