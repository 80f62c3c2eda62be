// Dashboard authentication: a session cookie plus, for writes from browsers, the configured
// dashboard Origin (CSRF defence that needs no token: SameSite=Lax already keeps the cookie
// off cross-site POSTs in current browsers, the Origin check covers the rest).
//
// Access rule: a workspace's resources are visible to its members; writing needs a role
// above viewer (some writes need owner/admin). A resource that exists in a workspace the user
// is not a member of answers 403 forbidden, one that does not exist 404 not_found: ids are
// random, so telling the two apart leaks nothing worth hiding, and it makes mistakes clearer.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type {} from '@fastify/cookie';
import { RelayError, forbidden, notFound } from '../../../domain/errors.ts';
import { canWrite, roleAtLeast, sessionCookieNameFor, type Membership, type Project, type Role, type Session, type User, type Workspace } from '../../../domain/management.ts';
import type { RelayConfig } from '../../../infra/config.ts';
import { projectsOf } from '../../services/management/projects.ts';
import { resolveSession } from '../../services/management/sessions.ts';
import { getMembership, workspacesOf } from '../../services/management/workspaces.ts';
import type { ApiContext } from '../context.ts';

export interface SessionPrincipal { user: User; session: Session }

export const sessionCookieName = (config: Pick<RelayConfig, 'env'>): string => sessionCookieNameFor(config.env);

const principals = new WeakMap<FastifyRequest, SessionPrincipal>();

const STATE_CHANGING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * Refuses browser writes coming from another site. A request without Origin comes from a
 * non-browser client (curl, a server) and cannot carry a victim's cookie by accident; a
 * browser that sends Sec-Fetch-Site: cross-site but no Origin is still refused.
 */
export function checkOrigin(config: Pick<RelayConfig, 'dashboardOrigin'>, request: FastifyRequest): void {
  if (!STATE_CHANGING.has(request.method)) return;
  const origin = request.headers.origin;
  if (origin !== undefined) {
    if (origin !== config.dashboardOrigin) throw new RelayError('origin_not_allowed', `requests from origin ${origin} may not change anything here`);
    return;
  }
  if (request.headers['sec-fetch-site'] === 'cross-site') throw new RelayError('origin_not_allowed', 'cross-site requests may not change anything here');
}

export function sessionTokenOf(config: Pick<RelayConfig, 'env'>, request: FastifyRequest): string | undefined {
  const name = sessionCookieName(config);
  const parsed = request.cookies as Record<string, string | undefined> | undefined;
  return parsed ? parsed[name] : undefined;
}

/**
 * The request's session (checked once per request, then remembered). Throws 403
 * origin_not_allowed for foreign browser writes and 401 session_required without a live session.
 */
export async function authenticateSession(ctx: ApiContext, request: FastifyRequest): Promise<SessionPrincipal> {
  const known = principals.get(request);
  if (known) return known;
  checkOrigin(ctx.config, request);
  const token = sessionTokenOf(ctx.config, request);
  const resolved = token ? await resolveSession(ctx.documents, token, ctx.now()) : null;
  if (!resolved) throw new RelayError('session_required', 'sign in first: this endpoint needs a dashboard session');
  principals.set(request, resolved);
  return resolved;
}

/** A hook (onRequest or preHandler) that lets only requests with a session through. */
export function requireSession(ctx: ApiContext) {
  return async (request: FastifyRequest, _reply: FastifyReply): Promise<void> => {
    await authenticateSession(ctx, request);
  };
}

export interface WorkspaceAccess { principal: SessionPrincipal; workspace: Workspace; membership: Membership }

/**
 * The message of the 403 for a caller who is no member of the workspace. The dashboard tells it
 * from other 403s (apps/dashboard/client/api.ts, noLongerMember): a page left open after its
 * reader was removed says so, and stops following.
 */
export const NOT_A_MEMBER = 'you are not a member of the workspace this belongs to';

export type AccessMode = 'read' | 'write';

/** What a role needs for a request: at least a role, and for writes one that canWrite allows (all but viewers). */
type Needed = { minimum: Role; mode: AccessMode };

/** The membership, if it grants what is needed; else the 403 that says why. */
function requireGranted(membership: Membership | null, { minimum, mode }: Needed): Membership {
  // Not naming the workspace: reached through a project, domain, key or endpoint of another
  // tenant, the answer would tell which of the ids the caller holds belong to one customer.
  if (!membership) throw forbidden(NOT_A_MEMBER);
  if (!roleAtLeast(membership.role, minimum)) throw forbidden(`this needs the ${minimum} role or higher in the workspace; you are ${membership.role}`);
  if (mode === 'write' && !canWrite(membership.role)) throw forbidden(`a ${membership.role} may read this workspace but not change it`);
  return membership;
}

async function requireAccess(ctx: ApiContext, request: FastifyRequest, workspaceId: string, needed: Needed): Promise<WorkspaceAccess> {
  const principal = await authenticateSession(ctx, request);
  const [workspace, membership] = await Promise.all([
    workspacesOf(ctx.documents).get(workspaceId),
    getMembership(ctx.documents, workspaceId, principal.user._id),
  ]);
  if (!workspace) throw notFound(`workspace ${workspaceId} not found`);
  return { principal, workspace, membership: requireGranted(membership, needed) };
}

/** The caller's membership of the workspace, with at least `minimum` as role. */
export async function requireWorkspaceRole(ctx: ApiContext, request: FastifyRequest, workspaceId: string, minimum: Role): Promise<WorkspaceAccess> {
  return requireAccess(ctx, request, workspaceId, { minimum, mode: 'read' });
}

/** Read: any member of the workspace; write: the roles domain/management.ts canWrite allows (all but viewers). */
export async function requireWorkspaceAccess(ctx: ApiContext, request: FastifyRequest, workspaceId: string, mode: AccessMode): Promise<WorkspaceAccess> {
  return requireAccess(ctx, request, workspaceId, { minimum: 'viewer', mode });
}

/**
 * Checks an access that requireWorkspaceAccess or requireProjectAccess granted for `mode` again,
 * on the membership as it is now: for a write that took time after its first check (a
 * template's compilation) or that is undone if the caller lost access meanwhile (a key just
 * made), so that nothing is written, or left, for a member removed (or demoted to viewer) before
 * it was done. The same 403 as the first check would give now; one read of the membership by its id.
 */
export async function requireAccessStill(ctx: ApiContext, access: WorkspaceAccess, mode: AccessMode): Promise<void> {
  requireGranted(await getMembership(ctx.documents, access.workspace._id, access.principal.user._id), { minimum: 'viewer', mode });
}

export interface ProjectAccess extends WorkspaceAccess { project: Project }

/** For every projectId-scoped endpoint (templates included): the project and the caller's role in its workspace. */
export async function requireProjectAccess(ctx: ApiContext, request: FastifyRequest, projectId: string, mode: AccessMode): Promise<ProjectAccess> {
  await authenticateSession(ctx, request);
  const project = await projectsOf(ctx.documents).get(projectId);
  if (!project) throw notFound(`project ${projectId} not found`);
  return { ...(await requireWorkspaceAccess(ctx, request, project.workspaceId, mode)), project };
}
