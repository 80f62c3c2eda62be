// Workspaces and their members. The creator becomes the owner; owners and admins invite
// members by the email they log in with, and the invited user accepts (nobody is made a member
// of a workspace without their consent). Activation (needed by production keys) is an
// operator's decision after review, never the customer's.
//
// An invitation is answered the same way whether the email has an account or not (no account
// enumeration through invitations): it waits, keyed by (workspace, email), until a user with
// that email accepts or declines it, an admin revokes it, or it expires. A user the operator
// creates later sees the invitations already waiting for their email.
import { conflict, forbidden, notFound } from '../../../domain/errors.ts';
import { canGrantRole, membershipIdOf, roleAtLeast, type Membership, type Role, type User, type Workspace } from '../../../domain/management.ts';
import { checkAllowance, type AllowanceSettings, type MonthlyAllowances } from '../../../domain/usage/quota.ts';
import { DuplicateKeyError, type DocumentStore, type Stored } from '../../../infra/ports/document-store.ts';
import { COLLECTIONS } from '../collections.ts';
import { insertUnique, updateDocument } from './documents.ts';
import { newId, sha256Hex } from './ids.ts';
import { normalizeName } from './names.ts';
import { findUserByEmail, normalizeUserEmail, usersOf } from './users.ts';

export const workspacesOf = (documents: DocumentStore) => documents.collection<Workspace>(COLLECTIONS.workspaces);
export const membershipsOf = (documents: DocumentStore) => documents.collection<Membership>(COLLECTIONS.memberships);

export interface WorkspaceView { id: string; name: string; activated: boolean; activatedAt: string | null; createdAt: string; role: Role }
export interface MemberView { userId: string; email: string; role: Role; createdAt: string }

export const workspaceView = (workspace: Workspace, role: Role): WorkspaceView => ({
  id: workspace._id,
  name: workspace.name,
  activated: workspace.activated,
  activatedAt: workspace.activatedAt,
  createdAt: workspace.createdAt,
  role,
});

export async function createWorkspace(documents: DocumentStore, owner: User, name: string, now: Date): Promise<{ workspace: Workspace; membership: Membership }> {
  const createdAt = now.toISOString();
  const workspace = await workspacesOf(documents).insert({ _id: newId('ws'), name: normalizeName(name), activated: false, activatedAt: null, createdAt });
  try {
    const membership = await membershipsOf(documents).insert({
      _id: membershipIdOf(workspace._id, owner._id), workspaceId: workspace._id, userId: owner._id, role: 'owner', createdAt,
    });
    return { workspace, membership };
  } catch (error) {
    // Two writes without a transaction: a workspace nobody owns would be unreachable, so undo it.
    await workspacesOf(documents).delete(workspace._id).catch(() => false);
    throw error;
  }
}

export async function getMembership(documents: DocumentStore, workspaceId: string, userId: string): Promise<Membership | null> {
  return membershipsOf(documents).get(membershipIdOf(workspaceId, userId));
}

/** The user's workspaces with their role in each, oldest membership first. */
export async function listWorkspacesOf(documents: DocumentStore, userId: string): Promise<WorkspaceView[]> {
  const memberships = await membershipsOf(documents).find({ where: { userId }, orderBy: [['userId', 'asc'], ['workspaceId', 'asc']] });
  const workspaces = await Promise.all(memberships.map((m) => workspacesOf(documents).get(m.workspaceId)));
  return memberships
    .map((m, i) => (workspaces[i] ? workspaceView(workspaces[i], m.role) : null))
    .filter((w): w is WorkspaceView => w !== null)
    .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id));
}

export async function listMembers(documents: DocumentStore, workspaceId: string): Promise<MemberView[]> {
  const memberships = await membershipsOf(documents).find({ where: { workspaceId }, orderBy: [['workspaceId', 'asc'], ['createdAt', 'asc']] });
  const users = await Promise.all(memberships.map((m) => usersOf(documents).get(m.userId)));
  return memberships.flatMap((m, i) => (users[i] ? [{ userId: m.userId, email: users[i].email, role: m.role, createdAt: m.createdAt }] : []));
}

/**
 * Whether `actor` may change or remove a member who has `target` (and, for a change, give
 * `next`): owners anyone, admins every role but owner, nobody else (domain/management.ts).
 */
function requireManageable(actor: Role, target: Role, next: Role = target): void {
  if (!canGrantRole(actor, target) || !canGrantRole(actor, next)) {
    throw forbidden(actor === 'admin' ? 'only owners may change or remove owners, or make members owners' : 'only owners and admins may change or remove members');
  }
}

/**
 * A workspace keeps an owner: the last one can be neither demoted nor removed. (No transaction
 * spans two memberships, so two owners demoting each other within the same few milliseconds
 * could both pass this check; the window is that of two requests, not of a process.)
 */
async function requireAnotherOwner(documents: DocumentStore, workspaceId: string, userId: string): Promise<void> {
  const owners = await membershipsOf(documents).find({ where: { workspaceId, role: 'owner' } });
  if (!owners.some((m) => m.userId !== userId)) throw conflict('a workspace keeps at least one owner: make another member owner first');
}

export async function changeMemberRole(documents: DocumentStore, input: { workspaceId: string; actorRole: Role; userId: string; role: Role }): Promise<MemberView> {
  const id = membershipIdOf(input.workspaceId, input.userId);
  const current = await membershipsOf(documents).get(id);
  if (!current) throw notFound(`user ${input.userId} is not a member of this workspace`);
  requireManageable(input.actorRole, current.role, input.role);
  if (current.role === 'owner' && input.role !== 'owner') await requireAnotherOwner(documents, input.workspaceId, input.userId);
  const updated = await updateDocument(membershipsOf(documents), id, 'membership', (m) => (m.role === input.role ? null : { ...m, role: input.role }));
  const user = await usersOf(documents).get(input.userId);
  return { userId: updated.userId, email: user?.email ?? '', role: updated.role, createdAt: updated.createdAt };
}

/** Removed by an owner or admin (as requireManageable allows), or leaving on one's own. */
export async function removeMember(documents: DocumentStore, input: { workspaceId: string; actorUserId: string; actorRole: Role; userId: string }): Promise<void> {
  const id = membershipIdOf(input.workspaceId, input.userId);
  const current = await membershipsOf(documents).get(id);
  if (!current) throw notFound(`user ${input.userId} is not a member of this workspace`);
  if (input.actorUserId !== input.userId) requireManageable(input.actorRole, current.role);
  if (current.role === 'owner') await requireAnotherOwner(documents, input.workspaceId, input.userId);
  await membershipsOf(documents).delete(id);
}

// ---------------------------------------------------------------------------------------
// Invitations

/** The invitations collection (to join COLLECTIONS as `invitations`). */
/** An invitation not accepted within 14 days lapses. */
export const INVITATION_TTL_MS = 14 * 24 * 60 * 60 * 1000;
/** Pending invitations a workspace may have at once. */
export const MAX_PENDING_INVITATIONS = 100;

export interface Invitation {
  _id: string;
  workspaceId: string;
  /** Normalized (trimmed, lower-cased): compared with the accepting user's email. */
  email: string;
  role: Role;
  /** The user who invited (last). */
  invitedBy: string;
  createdAt: string;
  expiresAt: string;
}

export interface InvitationView { id: string; workspaceId: string; workspaceName: string; email: string; role: Role; status: 'pending'; createdAt: string; expiresAt: string }

export const invitationsOf = (documents: DocumentStore) => documents.collection<Invitation>(COLLECTIONS.invitations);

/** One invitation per (workspace, email): inviting again renews it instead of adding a second. */
export const invitationIdOf = (workspaceId: string, email: string): string => `inv_${sha256Hex(`${workspaceId}\n${email}`).slice(0, 32)}`;

const invitationView = (invitation: Invitation, workspace: Pick<Workspace, 'name'>): InvitationView => ({
  id: invitation._id,
  workspaceId: invitation.workspaceId,
  workspaceName: workspace.name,
  email: invitation.email,
  role: invitation.role,
  status: 'pending',
  createdAt: invitation.createdAt,
  expiresAt: invitation.expiresAt,
});

const pending = (now: Date) => (invitation: Invitation) => invitation.expiresAt > now.toISOString();

const invitationNotFound = (id: string) => notFound(`invitation ${id} not found`);

/**
 * Invites `email` to the workspace with `role`. The answer is the same pending invitation
 * whether or not a user has that email; the same work is done either way. An email that is
 * already a member's is a 409: every member sees the members' emails, so it tells nothing new.
 */
export async function inviteMember(
  documents: DocumentStore,
  input: { workspace: Workspace; actorUserId: string; actorRole: Role; email: string; role: Role },
  now: Date,
): Promise<InvitationView> {
  if (!canGrantRole(input.actorRole, input.role)) {
    throw forbidden(input.actorRole === 'admin' ? 'only owners may add owners' : 'only owners and admins may add members');
  }
  const { workspace } = input;
  const email = normalizeUserEmail(input.email);
  const user = await findUserByEmail(documents, email);
  const membership = await getMembership(documents, workspace._id, user?._id ?? 'usr_none');
  if (user && membership) throw conflict(`${email} is already a member of this workspace`);

  const invitations = invitationsOf(documents);
  const id = invitationIdOf(workspace._id, email);
  const fresh: Invitation = {
    _id: id, workspaceId: workspace._id, email, role: input.role, invitedBy: input.actorUserId,
    createdAt: now.toISOString(), expiresAt: new Date(now.getTime() + INVITATION_TTL_MS).toISOString(),
  };
  const renew = (current: Stored<Invitation>): Invitation => ({ ...fresh, createdAt: pending(now)(current) ? current.createdAt : fresh.createdAt });
  for (let attempt = 0; attempt < 20; attempt++) {
    const current = await invitations.get(id);
    if (current) {
      const stored = await invitations.replace(renew(current), current._v);
      if (stored) return invitationView(stored, workspace);
      continue;
    }
    const open = (await invitations.find({ where: { workspaceId: workspace._id } })).filter(pending(now));
    if (open.length >= MAX_PENDING_INVITATIONS) {
      throw conflict(`this workspace has ${MAX_PENDING_INVITATIONS} pending invitations; revoke some (DELETE /v1/invitations/:id) or wait for them to lapse`);
    }
    try {
      return invitationView(await invitations.insert(fresh), workspace);
    } catch (error) {
      if (!(error instanceof DuplicateKeyError)) throw error; // invited at the same moment: renew that one
    }
  }
  throw conflict(`the invitation of ${email} is being changed by others; try again`);
}

/** The workspace's pending invitations, oldest first (for its members, next to the members). */
export async function listWorkspaceInvitations(documents: DocumentStore, workspace: Workspace, now: Date): Promise<InvitationView[]> {
  const found = await invitationsOf(documents).find({ where: { workspaceId: workspace._id } });
  return found
    .filter(pending(now))
    .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a._id.localeCompare(b._id))
    .map((i) => invitationView(i, workspace));
}

/** The pending invitations for the user's email, oldest first. */
export async function listInvitationsFor(documents: DocumentStore, user: User, now: Date): Promise<InvitationView[]> {
  const found = (await invitationsOf(documents).find({ where: { email: user.email } })).filter(pending(now));
  const workspaces = await Promise.all(found.map((i) => workspacesOf(documents).get(i.workspaceId)));
  return found
    .flatMap((invitation, i) => (workspaces[i] ? [invitationView(invitation, workspaces[i])] : []))
    .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id));
}

/**
 * The invited user joins the workspace with the invitation's role. An invitation that is not
 * for this user's email, has lapsed, or whose inviter may no longer grant the role is 404, like
 * one that does not exist.
 */
export async function acceptInvitation(documents: DocumentStore, user: User, invitationId: string, now: Date): Promise<WorkspaceView> {
  const invitation = await invitationsOf(documents).get(invitationId);
  if (!invitation || invitation.email !== user.email || !pending(now)(invitation)) throw invitationNotFound(invitationId);
  const [workspace, inviter] = await Promise.all([
    workspacesOf(documents).get(invitation.workspaceId),
    getMembership(documents, invitation.workspaceId, invitation.invitedBy),
  ]);
  if (!workspace || !inviter || !canGrantRole(inviter.role, invitation.role)) throw invitationNotFound(invitationId);
  const membership = await insertUnique(
    membershipsOf(documents),
    { _id: membershipIdOf(workspace._id, user._id), workspaceId: workspace._id, userId: user._id, role: invitation.role, createdAt: now.toISOString() },
    `you are already a member of workspace ${workspace._id}`,
  );
  await invitationsOf(documents).delete(invitation._id).catch(() => false);
  return workspaceView(workspace, membership.role);
}

/**
 * Declined by the invited user, or revoked by an owner or admin of the workspace. Anyone else:
 * 404 (a member with a lesser role: 403), so that nobody learns whom a workspace invited.
 */
export async function deleteInvitation(documents: DocumentStore, user: User, invitationId: string): Promise<{ deleted: true; id: string }> {
  const invitation = await invitationsOf(documents).get(invitationId);
  if (!invitation) throw invitationNotFound(invitationId);
  if (invitation.email !== user.email) {
    const membership = await getMembership(documents, invitation.workspaceId, user._id);
    if (!membership) throw invitationNotFound(invitationId);
    if (!roleAtLeast(membership.role, 'admin')) throw forbidden('only owners and admins may revoke invitations');
  }
  if (!(await invitationsOf(documents).delete(invitation._id))) throw invitationNotFound(invitationId);
  return { deleted: true, id: invitation._id };
}

/**
 * Sets or clears (null) the workspace's monthly allowances; those not named stay as they are.
 * Operators only (`relay workspace quota`): the allowance is what the installation grants.
 */
export async function setWorkspaceAllowances(
  documents: DocumentStore, workspaceId: string, changes: { [K in keyof MonthlyAllowances]?: number | null },
): Promise<Workspace> {
  for (const [name, value] of Object.entries(changes)) if (typeof value === 'number') checkAllowance(name, value);
  return updateDocument(workspacesOf(documents), workspaceId, 'workspace', (current) => {
    const allowances: AllowanceSettings = { ...current.allowances };
    for (const name of ['workspaceRecipients', 'developmentKeyRecipients'] as const) {
      const value = changes[name];
      if (value === null) delete allowances[name];
      else if (value !== undefined) allowances[name] = value;
    }
    const { allowances: _previous, ...rest } = current;
    const next: Workspace = Object.keys(allowances).length > 0 ? { ...rest, allowances } : rest;
    return JSON.stringify(next.allowances ?? {}) === JSON.stringify(current.allowances ?? {}) ? null : next;
  });
}

export async function setWorkspaceActivation(documents: DocumentStore, workspaceId: string, activated: boolean, now: Date): Promise<Workspace> {
  return updateDocument(workspacesOf(documents), workspaceId, 'workspace', (current) =>
    current.activated === activated ? null : { ...current, activated, activatedAt: activated ? now.toISOString() : null },
  );
}
