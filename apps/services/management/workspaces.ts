// Workspaces and their members. The creator becomes the owner; owners and admins add
// members by the email they log in with. Activation (needed by production keys) is an
// operator's decision after review, never the customer's.
import { forbidden, notFound } from '../../../domain/errors.ts';
import { canGrantRole, membershipIdOf, type Membership, type Role, type User, type Workspace } from '../../../domain/management.ts';
import type { DocumentStore } from '../../../infra/ports/document-store.ts';
import { COLLECTIONS } from '../collections.ts';
import { insertUnique, updateDocument } from './documents.ts';
import { newId } from './ids.ts';
import { normalizeName } from './names.ts';
import { findUserByEmail, usersOf } from './users.ts';

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

export async function addMember(
  documents: DocumentStore,
  input: { workspaceId: string; actorRole: Role; email: string; role: Role },
  now: Date,
): Promise<MemberView> {
  if (!canGrantRole(input.actorRole, input.role)) {
    throw forbidden(input.actorRole === 'admin' ? 'only owners may add owners' : 'only owners and admins may add members');
  }
  const user = await findUserByEmail(documents, input.email);
  // Users are created by the operator; telling a workspace admin that an email has no account
  // is what lets them ask for one.
  if (!user) throw notFound(`no user with email ${input.email.trim().toLowerCase()}; an operator creates users`);
  const membership = await insertUnique(
    membershipsOf(documents),
    { _id: membershipIdOf(input.workspaceId, user._id), workspaceId: input.workspaceId, userId: user._id, role: input.role, createdAt: now.toISOString() },
    `${user.email} is already a member of this workspace`,
  );
  return { userId: user._id, email: user.email, role: membership.role, createdAt: membership.createdAt };
}

export async function setWorkspaceActivation(documents: DocumentStore, workspaceId: string, activated: boolean, now: Date): Promise<Workspace> {
  return updateDocument(workspacesOf(documents), workspaceId, 'workspace', (current) =>
    current.activated === activated ? null : { ...current, activated, activatedAt: activated ? now.toISOString() : null },
  );
}
