// Workspaces and their members. Any signed-in user may create one, MAX_WORKSPACES_PER_CREATOR
// at most (each holds one of its creator's slots, ../slots.ts; workspaces are not deleted, so a
// slot is freed only when its creation failed). The creator becomes the owner; owners and admins invite
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
import { ABANDONED_SLOT_MS, claimHeldSlot, claimSlot, insertHoldingSlot, type HeldSlot, type SlotHolder } from '../slots.ts';
import { insertUnique, updateDocument } from './documents.ts';
import { managementChanged } from './reused-reads.ts';
import { newId, sha256Hex } from './ids.ts';
import { normalizeName } from './names.ts';
import { findUserByEmail, normalizeUserEmail, usersOf } from './users.ts';
import { compareText } from '../../../domain/text.ts';

/** A workspace as stored: its creator's slot, and the version owner changes commit by (see requireAnotherOwner). */
type WorkspaceDocument = Workspace & SlotHolder & {
  /** Moved by every demotion or removal of an owner (commitOwnerChange); absent: none yet. */
  ownersVersion?: number;
};

export const workspacesOf = (documents: DocumentStore) => documents.collection<WorkspaceDocument>(COLLECTIONS.workspaces);
export const membershipsOf = (documents: DocumentStore) => documents.collection<Membership>(COLLECTIONS.memberships);
const workspaceSlotsOf = (documents: DocumentStore) => documents.collection<HeldSlot>(COLLECTIONS.workspaceSlots);

/** The workspaces one user may create. */
export const MAX_WORKSPACES_PER_CREATOR = 10;

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
  const normalized = normalizeName(name);
  const id = newId('ws');
  const slot = await claimWorkspaceSlot(documents, owner._id, id, now);
  if (slot === null) throw conflict(`a user may create at most ${MAX_WORKSPACES_PER_CREATOR} workspaces`);
  return insertHoldingSlot(workspaceSlotsOf(documents), slot, id, async () => {
    const workspace = await workspacesOf(documents).insert({ _id: id, name: normalized, activated: false, activatedAt: null, createdAt, slot });
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
  });
}

/**
 * Claims a free slot of the creator for `workspaceId`: its id, or null when they created
 * MAX_WORKSPACES_PER_CREATOR. Workspaces made before slots existed hold none and name no
 * creator: those the user owns take as many slots off the end of the range.
 */
async function claimWorkspaceSlot(documents: DocumentStore, userId: string, workspaceId: string, now: Date): Promise<string | null> {
  const owned = await membershipsOf(documents).find({ where: { userId, role: 'owner' }, fields: ['workspaceId'] });
  const unslotted = owned.length === 0 ? 0 : await workspacesOf(documents).count({ _id: { in: owned.map((m) => m.workspaceId) }, slot: null });
  return claimHeldSlot(workspaceSlotsOf(documents), userId, MAX_WORKSPACES_PER_CREATOR - unslotted, workspaceId, now,
    (ids) => workspacesOf(documents).find({ where: { _id: { in: ids } }, fields: ['slot'] }));
}

export async function getMembership(documents: DocumentStore, workspaceId: string, userId: string): Promise<Membership | null> {
  return membershipsOf(documents).get(membershipIdOf(workspaceId, userId));
}

/** The user's workspaces with their role in each, oldest workspace first: two reads however many there are. */
export async function listWorkspacesOf(documents: DocumentStore, userId: string): Promise<WorkspaceView[]> {
  const memberships = await membershipsOf(documents).find({ where: { userId }, orderBy: [['userId', 'asc'], ['workspaceId', 'asc']] });
  if (memberships.length === 0) return [];
  const found = await workspacesOf(documents).find({ where: { _id: { in: memberships.map((m) => m.workspaceId) } } });
  const workspaces = new Map(found.map((w) => [w._id, w]));
  return memberships
    .flatMap((m) => {
      const workspace = workspaces.get(m.workspaceId);
      return workspace ? [workspaceView(workspace, m.role)] : [];
    })
    .sort((a, b) => compareText(a.createdAt, b.createdAt) || compareText(a.id, b.id));
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
 * A workspace keeps an owner: the last one can be neither demoted nor removed, also when owners
 * demote or remove each other (or leave) at the same moment, in any number of processes.
 *
 * No transaction spans two memberships, so a check of the owners alone would pass for two owners
 * demoting each other at once: each reads the other still owner before either write. The
 * workspace document is what they share: every demotion or removal of an owner reads it (its
 * version) before it counts the owners, here, writes the membership, and then commits by a
 * compare-and-set of the workspace (`ownersVersion` + 1) from the version it read
 * (commitOwnerChange). Of changes checked on the same owners, one commits; each other one finds
 * the workspace changed, counts the owners again on what is written now (its own write and the
 * winner's included), and either commits from the fresh version (an owner is left) or puts its
 * membership back as it was and answers 409. For the few milliseconds between its write and its
 * undo the member it demoted is not an owner; a process that dies between a membership write and
 * its commit or undo may leave the workspace as that write left it.
 *
 * Returns the workspace as read before the owners were counted: the version to commit from.
 */
async function requireAnotherOwner(documents: DocumentStore, workspaceId: string, userId: string): Promise<Stored<WorkspaceDocument>> {
  const workspace = await workspacesOf(documents).get(workspaceId);
  if (!workspace) throw notFound(`workspace ${workspaceId} not found`);
  const owners = await membershipsOf(documents).find({ where: { workspaceId, role: 'owner' }, fields: ['userId'] });
  if (!owners.some((m) => m.userId !== userId)) throw conflict('a workspace keeps at least one owner: make another member owner first');
  return workspace;
}

/**
 * Commits a demotion or removal of an owner, written already and checked on the owners read
 * after `checkedAt` (requireAnotherOwner): a compare-and-set of the workspace from that version.
 * When another owner change (or any write of the workspace) came first, the owners are counted
 * again from a fresh read; with none left `undo` puts the membership back and the answer is 409.
 */
async function commitOwnerChange(documents: DocumentStore, checkedAt: Stored<WorkspaceDocument>, undo: () => Promise<void>): Promise<void> {
  const workspaces = workspacesOf(documents);
  let base = checkedAt;
  for (let attempt = 0; attempt < 20; attempt++) {
    if (attempt > 0 && (await membershipsOf(documents).count({ workspaceId: base._id, role: 'owner' })) === 0) {
      await undo();
      throw conflict('a workspace keeps at least one owner: another owner was demoted or removed at the same time, so this change was not made; try again');
    }
    const { _v: version, ...body } = base;
    try {
      if (await workspaces.replace({ ...body, ownersVersion: (base.ownersVersion ?? 0) + 1 }, version)) return;
    } finally {
      managementChanged();
    }
    const fresh = await workspaces.get(base._id);
    if (!fresh) return; // workspaces are not deleted
    base = fresh;
  }
  await undo();
  throw conflict(`the owners of workspace ${checkedAt._id} are being changed by others; try again`);
}

/** Makes the member an owner again (as they were before a change that could not commit), however their membership changed since. */
async function restoreOwner(documents: DocumentStore, before: Membership): Promise<void> {
  const memberships = membershipsOf(documents);
  const { _v: _ignored, ...owner } = before as Stored<Membership>;
  for (let attempt = 0; attempt < 20; attempt++) {
    const current = await memberships.get(owner._id);
    if (current?.role === 'owner') return;
    if (!current) {
      try {
        await memberships.insert({ ...owner, role: 'owner' });
        return;
      } catch (error) {
        if (!(error instanceof DuplicateKeyError)) throw error;
        continue;
      }
    }
    const { _v: version, ...body } = current;
    if (await memberships.replace({ ...body, role: 'owner' }, version)) return;
  }
  throw new Error(`could not make user ${owner.userId} owner of workspace ${owner.workspaceId} again`);
}

export async function changeMemberRole(documents: DocumentStore, input: { workspaceId: string; actorRole: Role; userId: string; role: Role }): Promise<MemberView> {
  const id = membershipIdOf(input.workspaceId, input.userId);
  const current = await membershipsOf(documents).get(id);
  if (!current) throw notFound(`user ${input.userId} is not a member of this workspace`);
  requireManageable(input.actorRole, current.role, input.role);
  const checkedAt = current.role === 'owner' && input.role !== 'owner' ? await requireAnotherOwner(documents, input.workspaceId, input.userId) : null;
  // The checks hold for the copy they read; the write is made against the copy it replaces.
  // updateDocument retries from a fresh read when the member changed in between (an owner
  // promoting them, say), so the rules are checked again on that copy: an admin who read a
  // developer must not write over an owner. (A demotion's other-owner check is async; when the
  // fresh copy is an owner the first read was not, the write is refused and the request retried.)
  // The copy the write replaced, when it was an owner's: a demotion to commit.
  const written: { demoted: Membership | null } = { demoted: null };
  const updated = await updateDocument(membershipsOf(documents), id, 'membership', (m) => {
    requireManageable(input.actorRole, m.role, input.role);
    if (m.role === 'owner' && input.role !== 'owner' && current.role !== 'owner') {
      throw conflict(`the role of user ${input.userId} changed meanwhile; try again`);
    }
    written.demoted = m.role === 'owner' && input.role !== 'owner' ? m : null;
    return m.role === input.role ? null : { ...m, role: input.role };
  });
  const { demoted } = written;
  if (demoted !== null && checkedAt !== null) await commitOwnerChange(documents, checkedAt, () => restoreOwner(documents, demoted));
  const user = await usersOf(documents).get(input.userId);
  return { userId: updated.userId, email: user?.email ?? '', role: updated.role, createdAt: updated.createdAt };
}

/** Removed by an owner or admin (as requireManageable allows), or leaving on one's own. */
export async function removeMember(documents: DocumentStore, input: { workspaceId: string; actorUserId: string; actorRole: Role; userId: string }): Promise<void> {
  const id = membershipIdOf(input.workspaceId, input.userId);
  const current = await membershipsOf(documents).get(id);
  if (!current) throw notFound(`user ${input.userId} is not a member of this workspace`);
  if (input.actorUserId !== input.userId) requireManageable(input.actorRole, current.role);
  const checkedAt = current.role === 'owner' ? await requireAnotherOwner(documents, input.workspaceId, input.userId) : null;
  // Deleted only as checked: a membership changed since (promoted to owner, say) is not removed
  // on the strength of a check made on its old role; the caller tries again and is checked anew.
  if (!(await membershipsOf(documents).delete(id, current._v))) {
    if (!(await membershipsOf(documents).get(id))) throw notFound(`user ${input.userId} is not a member of this workspace`);
    throw conflict(`the membership of user ${input.userId} changed meanwhile; try again`);
  }
  if (checkedAt !== null) await commitOwnerChange(documents, checkedAt, () => restoreOwner(documents, current));
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
  /** The workspace's invitation slot it holds (claimInvitationSlot); absent on invitations made before slots existed. */
  slot?: string;
}

/**
 * One of a workspace's MAX_PENDING_INVITATIONS slots, taken: `<workspaceId>#<n>`, naming the
 * invitation that holds it. Why slots: counting the pending invitations and then inserting
 * lets concurrent invitations all see room for one more; inserting then counting and deleting
 * one's own when over would hold the limit but could refuse them all when only some are too
 * many (each sees the others before they leave), and ordering them needs a clock all processes
 * share. A slot is a unique insert, so exactly the room there is is handed out (../slots.ts).
 */
export interface InvitationSlot {
  _id: string;
  workspaceId: string;
  invitationId: string;
  claimedAt: string;
}

const slotsOf = (documents: DocumentStore) => documents.collection<InvitationSlot>(COLLECTIONS.invitationSlots);

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

/** Reads inviters' memberships, each once however many invitations name it: the role of a user in a workspace, or null. */
type InviterRoles = (invitation: Pick<Invitation, 'workspaceId' | 'invitedBy'>) => Promise<Role | null>;

function inviterRoles(documents: DocumentStore): InviterRoles {
  const read = new Map<string, Promise<Role | null>>();
  return (invitation) => {
    const id = membershipIdOf(invitation.workspaceId, invitation.invitedBy);
    let role = read.get(id);
    if (role === undefined) {
      role = membershipsOf(documents).get(id).then((m) => m?.role ?? null);
      read.set(id, role);
    }
    return role;
  };
}

/**
 * Whether an invitation is live: an accept of it by its invitee would be taken, because it has
 * not lapsed and its inviter is still a member whose role may grant its role (an admin removed,
 * or demoted to developer, no longer may). The one rule of the accept, both lists of pending
 * invitations and the workspace's invitation slots: an invitation no accept could take is
 * neither listed nor counted, and its slot is freed.
 */
async function isLive(invitation: Invitation, roleOf: InviterRoles, now: Date): Promise<boolean> {
  if (!pending(now)(invitation)) return false;
  const inviter = await roleOf(invitation);
  return inviter !== null && canGrantRole(inviter, invitation.role);
}

/** Those of `invitations` that are live (isLive), in the same order. */
async function liveOnes<I extends Invitation>(invitations: I[], roleOf: InviterRoles, now: Date): Promise<I[]> {
  const live = await Promise.all(invitations.map((invitation) => isLive(invitation, roleOf, now)));
  return invitations.filter((_invitation, i) => live[i]);
}

const invitationNotFound = (id: string) => notFound(`invitation ${id} not found`);

/**
 * Claims a free slot of the workspace for `invitationId`: its id, or null when the workspace has
 * MAX_PENDING_INVITATIONS live (isLive). The first free slot is taken by inserting it; a taken one
 * (../slots.ts) is freed if its invitation is gone, no longer live (lapsed, or its inviter may no
 * longer grant it) or holds another (see freeStaleSlot), else the claim moves to the next.
 * Accepting, declining and revoking free the slot at once; the slot of an invitation that is no
 * longer live is freed by the next claim that finds it.
 *
 * Live invitations made before slots existed hold none: they take as many slots off the end of
 * the range. Their number never grows (a renewal keeps a live one as it is; one no longer live
 * is renewed as a new invitation, which claims a slot), so slots taken plus those never pass
 * the limit.
 */
async function claimInvitationSlot(documents: DocumentStore, workspaceId: string, invitationId: string, now: Date): Promise<string | null> {
  const roleOf = inviterRoles(documents);
  const unslotted = (await liveOnes((await invitationsOf(documents).find({ where: { workspaceId } })).filter((i) => i.slot === undefined), roleOf, now)).length;
  return claimSlot(slotsOf(documents), workspaceId, MAX_PENDING_INVITATIONS - unslotted,
    (id) => ({ _id: id, workspaceId, invitationId, claimedAt: now.toISOString() }), (id) => freeStaleSlot(documents, id, roleOf, now));
}

/**
 * Frees a slot whose invitation no longer holds it: no longer live (the invitation is deleted
 * first, compare-and-delete, so a renewal racing this either wins and keeps its slot or finds
 * its invitation gone and claims anew), or, ABANDONED_SLOT_MS after the claim, gone or holding
 * another slot. Whether the slot may be free now.
 */
async function freeStaleSlot(documents: DocumentStore, id: string, roleOf: InviterRoles, now: Date): Promise<boolean> {
  const taken = await slotsOf(documents).get(id);
  if (!taken) return true;
  const invitation = await invitationsOf(documents).get(taken.invitationId);
  if (invitation?.slot === id) {
    if (await isLive(invitation, roleOf, now)) return false;
    if (!(await invitationsOf(documents).delete(invitation._id, invitation._v))) return false;
  } else if (Date.parse(taken.claimedAt) > now.getTime() - ABANDONED_SLOT_MS) {
    return false; // its claimer may be about to insert the invitation holding it
  }
  await slotsOf(documents).delete(id, taken._v);
  return true;
}

/** Frees `invitation`'s slot once the invitation is deleted, unless a newer invitation of the same id holds it again. */
async function freeInvitationSlot(documents: DocumentStore, invitation: Pick<Invitation, '_id' | 'slot'>): Promise<void> {
  if (invitation.slot === undefined) return;
  const taken = await slotsOf(documents).get(invitation.slot);
  if (taken?.invitationId !== invitation._id) return;
  if ((await invitationsOf(documents).get(invitation._id))?.slot === invitation.slot) return;
  await slotsOf(documents).delete(taken._id, taken._v);
}

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
  // A live invitation is renewed in place and keeps its slot (or its lack of one); one no longer
  // live (lapsed, or its inviter may no longer grant it) is deleted (compare-and-delete) and made
  // anew, claiming a slot like any new invitation.
  const renew = (current: Stored<Invitation>): Invitation => ({
    ...fresh, createdAt: current.createdAt, ...(current.slot === undefined ? {} : { slot: current.slot }),
  });
  for (let attempt = 0; attempt < 20; attempt++) {
    const current = await invitations.get(id);
    if (current && (await isLive(current, inviterRoles(documents), now))) {
      const stored = await invitations.replace(renew(current), current._v);
      if (stored) return invitationView(stored, workspace);
      continue;
    }
    if (current) {
      if (await invitations.delete(id, current._v)) await freeInvitationSlot(documents, current);
      continue;
    }
    const slot = await claimInvitationSlot(documents, workspace._id, id, now);
    if (slot === null) {
      throw conflict(`this workspace has ${MAX_PENDING_INVITATIONS} pending invitations; revoke some (DELETE /v1/invitations/:id) or wait for them to lapse`);
    }
    try {
      return invitationView(await invitations.insert({ ...fresh, slot }), workspace);
    } catch (error) {
      await freeInvitationSlot(documents, { _id: id, slot });
      if (!(error instanceof DuplicateKeyError)) throw error; // invited at the same moment: renew that one
    }
  }
  throw conflict(`the invitation of ${email} is being changed by others; try again`);
}

/** The workspace's pending (live: isLive) invitations, oldest first (for its members, next to the members). */
export async function listWorkspaceInvitations(documents: DocumentStore, workspace: Workspace, now: Date): Promise<InvitationView[]> {
  const found = await liveOnes(await invitationsOf(documents).find({ where: { workspaceId: workspace._id } }), inviterRoles(documents), now);
  return found
    .sort((a, b) => compareText(a.createdAt, b.createdAt) || compareText(a._id, b._id))
    .map((i) => invitationView(i, workspace));
}

/** The pending (live: isLive) invitations for the user's email, oldest first. */
export async function listInvitationsFor(documents: DocumentStore, user: User, now: Date): Promise<InvitationView[]> {
  const found = await liveOnes(await invitationsOf(documents).find({ where: { email: user.email } }), inviterRoles(documents), now);
  const workspaces = await Promise.all(found.map((i) => workspacesOf(documents).get(i.workspaceId)));
  return found
    .flatMap((invitation, i) => (workspaces[i] ? [invitationView(invitation, workspaces[i])] : []))
    .sort((a, b) => compareText(a.createdAt, b.createdAt) || compareText(a.id, b.id));
}

/**
 * The invited user joins the workspace with the invitation's role. An invitation that is not
 * for this user's email or is not live (isLive: lapsed, or its inviter may no longer grant the
 * role) is 404, like one that does not exist.
 *
 * The invitation is taken (deleted at the version the decision read) before the membership is
 * made: an admin's revocation or renewal in between makes the delete miss, and the accept is
 * decided again on the invitation as it now is (gone: 404 like any revoked one; renewed: its
 * role). Taken first, a crash before the membership costs a new invitation, never a membership
 * nobody had the right to grant.
 */
export async function acceptInvitation(documents: DocumentStore, user: User, invitationId: string, now: Date): Promise<WorkspaceView> {
  const invitations = invitationsOf(documents);
  for (let attempt = 0; attempt < 20; attempt++) {
    const invitation = await invitations.get(invitationId);
    if (!invitation || invitation.email !== user.email) throw invitationNotFound(invitationId);
    const [workspace, live, membership] = await Promise.all([
      workspacesOf(documents).get(invitation.workspaceId),
      isLive(invitation, inviterRoles(documents), now),
      getMembership(documents, invitation.workspaceId, user._id),
    ]);
    if (!workspace || !live) throw invitationNotFound(invitationId);
    const alreadyMember = `you are already a member of workspace ${workspace._id}`;
    // Checked before the invitation is taken, so that a member's accept is refused without spending it.
    if (membership) throw conflict(alreadyMember);
    if (!(await invitations.delete(invitation._id, invitation._v))) continue;
    await freeInvitationSlot(documents, invitation).catch(() => undefined);
    const joined = await insertUnique(
      membershipsOf(documents),
      { _id: membershipIdOf(workspace._id, user._id), workspaceId: workspace._id, userId: user._id, role: invitation.role, createdAt: now.toISOString() },
      alreadyMember,
    );
    return workspaceView(workspace, joined.role);
  }
  throw conflict(`invitation ${invitationId} is being changed by others; try again`);
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
  await freeInvitationSlot(documents, invitation);
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
