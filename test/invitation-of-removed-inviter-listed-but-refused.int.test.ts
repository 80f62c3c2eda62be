// An invitation is pending only while its invitee could accept it: one rule (isLive in
// apps/services/management/workspaces.ts) decides the accept, both lists of pending invitations
// and the workspace's invitation slots. Once the admin who invited someone is removed from the
// workspace, or demoted below a role that may grant the invitation's, the invitation is no longer
// listed as pending (to the invitee in GET /v1/invitations, to the members in
// GET /v1/workspaces/:id), its accept is 404, and it no longer holds one of the workspace's 100
// invitation slots (MANAGEMENT-API.md, Invitations).
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from './support/app.ts';
import { MAX_PENDING_INVITATIONS } from '../apps/services/management/workspaces.ts';
import { addMember, call, newCaller, workspaceWithProject, type Caller } from './support/management.ts';

interface Ctx { t: TestApp; owner: Caller; n: number }
const test = suite<Ctx>('an invitation whose inviter left the workspace');

test.before(async (ctx) => {
  ctx.t = await startTestApp();
  ctx.owner = await newCaller(ctx.t, 'owner@inviter-left.test');
  ctx.n = 0;
});
test.after(async (ctx) => { await ctx.t.close(); });

async function invitedByAnAdmin(ctx: Ctx) {
  const n = ++ctx.n;
  const admin = await newCaller(ctx.t, `admin${n}@inviter-left.test`);
  const invitee = await newCaller(ctx.t, `invitee${n}@inviter-left.test`);
  const { workspaceId } = await workspaceWithProject(ctx.t, ctx.owner);
  await addMember(ctx.t, ctx.owner, workspaceId, admin, 'admin');
  const invited = await call(ctx.t, 'POST', `/v1/workspaces/${workspaceId}/members`, { as: admin, body: { email: invitee.email, role: 'developer' } });
  assert.is(invited.statusCode, 201, invited.body);
  return { admin, invitee, workspaceId, invitationId: invited.json().id as string };
}

async function listsAndAccept(ctx: Ctx, invitee: Caller, workspaceId: string, invitationId: string) {
  const mine = (await call(ctx.t, 'GET', '/v1/invitations', { as: invitee })).json().invitations as Array<{ id: string; status: string }>;
  const theirs = (await call(ctx.t, 'GET', `/v1/workspaces/${workspaceId}`, { as: ctx.owner })).json().invitations as Array<{ id: string; status: string }>;
  const accepted = await call(ctx.t, 'POST', `/v1/invitations/${invitationId}/accept`, { as: invitee });
  return {
    listedToInvitee: mine.some((i) => i.id === invitationId && i.status === 'pending'),
    listedToOwner: theirs.some((i) => i.id === invitationId && i.status === 'pending'),
    accepted,
  };
}

test('the inviting admin removed: the invitation is listed to nobody, and its accept is 404', async (ctx) => {
  const { admin, invitee, workspaceId, invitationId } = await invitedByAnAdmin(ctx);
  const removed = await call(ctx.t, 'DELETE', `/v1/workspaces/${workspaceId}/members/${admin.userId}`, { as: ctx.owner });
  assert.is(removed.statusCode, 200, removed.body);

  const { listedToInvitee, listedToOwner, accepted } = await listsAndAccept(ctx, invitee, workspaceId, invitationId);
  assert.equal(
    { listedToInvitee, listedToOwner, accept: accepted.statusCode },
    { listedToInvitee: false, listedToOwner: false, accept: 404 },
    `listed as pending to the invitee: ${listedToInvitee}, to the owner: ${listedToOwner}; accepting it: ${accepted.statusCode} ${accepted.body}`,
  );
});

test('the inviting admin demoted to developer: the same', async (ctx) => {
  const { admin, invitee, workspaceId, invitationId } = await invitedByAnAdmin(ctx);
  const demoted = await call(ctx.t, 'PATCH', `/v1/workspaces/${workspaceId}/members/${admin.userId}`, { as: ctx.owner, body: { role: 'developer' } });
  assert.is(demoted.statusCode, 200, demoted.body);

  const { listedToInvitee, listedToOwner, accepted } = await listsAndAccept(ctx, invitee, workspaceId, invitationId);
  assert.equal(
    { listedToInvitee, listedToOwner, accept: accepted.statusCode },
    { listedToInvitee: false, listedToOwner: false, accept: 404 },
    `listed as pending to the invitee: ${listedToInvitee}, to the owner: ${listedToOwner}; accepting it: ${accepted.statusCode} ${accepted.body}`,
  );
});

test('the invitations of an admin who was removed hold none of the workspace\'s slots', async (ctx) => {
  const n = ++ctx.n;
  const admin = await newCaller(ctx.t, `admin${n}@inviter-left.test`);
  const { workspaceId } = await workspaceWithProject(ctx.t, ctx.owner);
  await addMember(ctx.t, ctx.owner, workspaceId, admin, 'admin');
  for (let i = 0; i < MAX_PENDING_INVITATIONS; i++) {
    const r = await call(ctx.t, 'POST', `/v1/workspaces/${workspaceId}/members`, { as: admin, body: { email: `guest${i}@inviter-left.test`, role: 'viewer' } });
    assert.is(r.statusCode, 201, r.body);
  }
  const full = await call(ctx.t, 'POST', `/v1/workspaces/${workspaceId}/members`, { as: ctx.owner, body: { email: 'first@inviter-left.test', role: 'viewer' } });
  assert.is(full.statusCode, 409, full.body);

  const removed = await call(ctx.t, 'DELETE', `/v1/workspaces/${workspaceId}/members/${admin.userId}`, { as: ctx.owner });
  assert.is(removed.statusCode, 200, removed.body);
  const listed = (await call(ctx.t, 'GET', `/v1/workspaces/${workspaceId}`, { as: ctx.owner })).json().invitations as unknown[];
  assert.is(listed.length, 0, 'the removed admin\'s invitations are not listed');
  const room = await call(ctx.t, 'POST', `/v1/workspaces/${workspaceId}/members`, { as: ctx.owner, body: { email: 'first@inviter-left.test', role: 'viewer' } });
  assert.is(room.statusCode, 201, room.body);
  // Renewed by a member who may grant it, one of them is live again (in a slot of its own).
  const renewed = await call(ctx.t, 'POST', `/v1/workspaces/${workspaceId}/members`, { as: ctx.owner, body: { email: 'guest0@inviter-left.test', role: 'viewer' } });
  assert.is(renewed.statusCode, 201, renewed.body);
  const pending = (await call(ctx.t, 'GET', `/v1/workspaces/${workspaceId}`, { as: ctx.owner })).json().invitations as Array<{ email: string }>;
  assert.equal(pending.map((i) => i.email).sort(), ['first@inviter-left.test', 'guest0@inviter-left.test']);
});

test.run();
