// Workspaces and members. Any signed-in user may create a workspace (and owns it);
// activation for production sending is an operator's act (relay workspace activate).
// Members join by invitation: an owner or admin invites an email, the user with that email
// accepts (MANAGEMENT-API.md, Invitations).
import type { FastifyInstance } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import {
  acceptInvitation, changeMemberRole, createWorkspace, deleteInvitation, inviteMember, listInvitationsFor, listMembers, listWorkspaceInvitations,
  listWorkspacesOf, removeMember, workspaceView,
} from '../../services/management/workspaces.ts';
import { authenticateSession, requireSession, requireWorkspaceRole } from '../auth/session.ts';
import type { ApiContext } from '../context.ts';
import {
  Address, Id, Invitation, InvitationDeleted, InvitationList, Member, MemberRemoved, Name, Role, Workspace, WorkspaceDetail, WorkspaceList,
} from './management-schemas.ts';
import { NoQuery } from './query.schemas.ts';

const CreateWorkspace = Type.Object({ name: Name }, { additionalProperties: false });
const AddMember = Type.Object({ email: Address, role: Role }, { additionalProperties: false });
const ById = Type.Object({ id: Id });
const ByMember = Type.Object({ id: Id, userId: Id });
const ChangeRole = Type.Object({ role: Role }, { additionalProperties: false });

export async function workspaceRoutes(app: FastifyInstance, ctx: ApiContext): Promise<void> {
  app.addHook('onRequest', requireSession(ctx));

  app.post<{ Body: Static<typeof CreateWorkspace> }>('/v1/workspaces', {
    schema: { querystring: NoQuery, body: CreateWorkspace },
    config: { openapi: { responses: { 201: { description: 'Created; the caller owns it.', schema: Workspace } } } },
  }, async (request, reply) => {
    const { user } = await authenticateSession(ctx, request);
    const { workspace, membership } = await createWorkspace(ctx.documents, user, request.body.name, ctx.now());
    return reply.status(201).send(workspaceView(workspace, membership.role));
  });

  app.get('/v1/workspaces', {
    schema: { querystring: NoQuery },
    config: { openapi: { responses: { 200: { description: 'The caller\'s workspaces, oldest first.', schema: WorkspaceList } } } },
  }, async (request) => {
    const { user } = await authenticateSession(ctx, request);
    return { workspaces: await listWorkspacesOf(ctx.documents, user._id) };
  });

  app.get<{ Params: Static<typeof ById> }>('/v1/workspaces/:id', {
    schema: { params: ById, querystring: NoQuery },
    config: { openapi: { responses: { 200: { description: 'The workspace with its members and pending invitations.', schema: WorkspaceDetail } } } },
  }, async (request) => {
    const { workspace, membership } = await requireWorkspaceRole(ctx, request, request.params.id, 'viewer');
    return {
      ...workspaceView(workspace, membership.role),
      members: await listMembers(ctx.documents, workspace._id),
      invitations: await listWorkspaceInvitations(ctx.documents, workspace, ctx.now()),
    };
  });

  // An invitation, whether or not the email has an account: the answer never says which.
  app.post<{ Params: Static<typeof ById>; Body: Static<typeof AddMember> }>(
    '/v1/workspaces/:id/members',
    {
      schema: { params: ById, querystring: NoQuery, body: AddMember },
      config: { openapi: { responses: { 201: { description: 'The pending invitation (new or renewed), whether or not the email has an account.', schema: Invitation } } } },
    },
    async (request, reply) => {
      const { principal, workspace, membership } = await requireWorkspaceRole(ctx, request, request.params.id, 'admin');
      const invitation = await inviteMember(ctx.documents, {
        workspace, actorUserId: principal.user._id, actorRole: membership.role, email: request.body.email, role: request.body.role,
      }, ctx.now());
      return reply.status(201).send(invitation);
    },
  );

  app.patch<{ Params: Static<typeof ByMember>; Body: Static<typeof ChangeRole> }>(
    '/v1/workspaces/:id/members/:userId',
    {
      schema: { params: ByMember, querystring: NoQuery, body: ChangeRole },
      config: { openapi: { responses: { 200: { description: 'The member with the new role.', schema: Member } } } },
    },
    async (request) => {
      const { workspace, membership } = await requireWorkspaceRole(ctx, request, request.params.id, 'admin');
      return changeMemberRole(ctx.documents, { workspaceId: workspace._id, actorRole: membership.role, userId: request.params.userId, role: request.body.role });
    },
  );

  // Any member may leave; owners and admins remove others (as they may invite them).
  app.delete<{ Params: Static<typeof ByMember> }>('/v1/workspaces/:id/members/:userId', {
    schema: { params: ByMember, querystring: NoQuery },
    config: { openapi: { responses: { 200: { description: 'Removed (or left).', schema: MemberRemoved } } } },
  }, async (request) => {
    const { principal, workspace, membership } = await requireWorkspaceRole(ctx, request, request.params.id, 'viewer');
    await removeMember(ctx.documents, { workspaceId: workspace._id, actorUserId: principal.user._id, actorRole: membership.role, userId: request.params.userId });
    return { deleted: true, userId: request.params.userId };
  });

  app.get('/v1/invitations', {
    schema: { querystring: NoQuery },
    config: { openapi: { responses: { 200: { description: 'The pending invitations for the caller\'s email.', schema: InvitationList } } } },
  }, async (request) => {
    const { user } = await authenticateSession(ctx, request);
    return { invitations: await listInvitationsFor(ctx.documents, user, ctx.now()) };
  });

  app.post<{ Params: Static<typeof ById> }>('/v1/invitations/:id/accept', {
    schema: { params: ById, querystring: NoQuery },
    config: { openapi: { responses: { 200: { description: 'Accepted: the workspace the caller is now a member of.', schema: Workspace } } } },
  }, async (request) => {
    const { user } = await authenticateSession(ctx, request);
    return acceptInvitation(ctx.documents, user, request.params.id, ctx.now());
  });

  app.delete<{ Params: Static<typeof ById> }>('/v1/invitations/:id', {
    schema: { params: ById, querystring: NoQuery },
    config: { openapi: { responses: { 200: { description: 'Declined by the invited user, or revoked.', schema: InvitationDeleted } } } },
  }, async (request) => {
    const { user } = await authenticateSession(ctx, request);
    return deleteInvitation(ctx.documents, user, request.params.id);
  });
}
