// What a page is given: where it is (params, query), who is signed in, the workspace and
// project it is about, what the reader's role allows, and the element to draw into.

export type Role = 'owner' | 'admin' | 'developer' | 'viewer';

export interface Capabilities {
  /** Change projects, domains, keys, templates, webhook endpoints (all roles but viewer). */
  write: boolean;
  /** Add and remove suppressions (owners and admins). */
  suppressions: boolean;
  /** The roles this role may give (invitations, role changes): empty for those who may not. */
  grants: Role[];
}

/** Decided by the server from Relay's rules (apps/dashboard/dashboard.ts dashboardSettings). */
export interface Settings {
  dashboardOrigin: string;
  statuses: string[];
  webhookEvents: string[];
  permissions: string[];
  roles: Record<Role, Capabilities>;
  /** Per deliverability rate: the outcome it counts among the recipients that reached any outcome of its base. */
  rates: Record<'bounce_rate' | 'complaint_rate', RateDefinition>;
  /** How long a request waits for its answer, or for its next part, before it is given up: the API's idle timeout. */
  requestDeadlineMs: number;
}

export interface RateDefinition { counts: string; base: string[] }

export interface Membership { workspaceId: string; workspaceName: string; role: Role; activated: boolean }
export interface SessionInfo { user: { id: string; email: string }; expiresAt: string; memberships: Membership[] }
export interface Project { id: string; workspaceId: string; name: string; environment: 'development' | 'production'; createdAt: string }

export interface PageContext {
  params: Record<string, string>;
  query: URLSearchParams;
  settings: Settings;
  /** Null on public pages (sign-in). */
  session: SessionInfo | null;
  /** Set on workspace and project pages. */
  workspace: Membership | null;
  /** The project of a project page; on workspace pages, the one last used in that workspace (or null). */
  project: Project | null;
  /** The workspace's projects (for links and pickers). */
  projects: Project[];
  can: Capabilities;
  /** Where the page draws. */
  main: HTMLElement;
  /** Sets the page's heading and the document title. */
  title(text: string): void;
}

export interface PageModule {
  render(ctx: PageContext): Promise<void>;
}

export function readSettings(): Settings {
  return JSON.parse(document.getElementById('relay-settings')!.textContent!) as Settings;
}

/** The project last opened in a workspace, so workspace pages link back to it. */
export const lastProject = {
  get: (workspaceId: string): string | null => localStorage.getItem(`relay.project.${workspaceId}`),
  set: (workspaceId: string, projectId: string) => localStorage.setItem(`relay.project.${workspaceId}`, projectId),
};
