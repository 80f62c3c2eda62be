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
  { path: '/signed-in', scope: 'user', module: 'signed-in' },
  { path: '/invitations', scope: 'user', module: 'invitations' },
  { path: '/projects/:projectId/emails', scope: 'project', nav: 'Emails', module: 'emails' },
  { path: '/projects/:projectId/emails/:emailId', scope: 'project', section: 'Emails', module: 'email' },
  { path: '/projects/:projectId/emails/:emailId/message', scope: 'project', section: 'Emails', module: 'message' },
  { path: '/projects/:projectId/stats', scope: 'project', nav: 'Stats', module: 'stats' },
  { path: '/projects/:projectId/templates', scope: 'project', nav: 'Templates', module: 'templates' },
  { path: '/projects/:projectId/templates/:templateId', scope: 'project', section: 'Templates', module: 'template' },
  { path: '/projects/:projectId/api-keys', scope: 'project', nav: 'API keys', module: 'api-keys' },
  { path: '/projects/:projectId/webhooks', scope: 'project', nav: 'Webhooks', module: 'webhooks' },
  { path: '/projects/:projectId/webhooks/:endpointId', scope: 'project', section: 'Webhooks', module: 'webhook' },
  { path: '/workspaces/:workspaceId/domains', scope: 'workspace', nav: 'Domains', module: 'domains' },
  { path: '/workspaces/:workspaceId/domains/:domainId', scope: 'workspace', section: 'Domains', module: 'domain' },
  { path: '/workspaces/:workspaceId/suppressions', scope: 'workspace', nav: 'Suppressions', module: 'suppressions' },
  { path: '/workspaces/:workspaceId/members', scope: 'workspace', nav: 'Members', module: 'members' },
  { path: '/workspaces/:workspaceId/usage', scope: 'workspace', nav: 'Usage', module: 'usage' },
  { path: '/workspaces/:workspaceId/projects', scope: 'workspace', nav: 'Projects', module: 'projects' },
];
