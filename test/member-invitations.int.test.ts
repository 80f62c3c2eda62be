// Adding a member is an invitation the invited user accepts. The answer to an invitation must
// not say whether the email has an account (POST /v1/workspaces/:id/members used to add a
// registered user at once and answer 404 "no user with email …" otherwise), and nobody becomes
// a member of a workspace without accepting.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createUser } from '../apps/services/management/users.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { call, errorCode, newCaller, PASSWORD, signIn, workspaceWithProject, type Caller } from './support/management.ts';

interface Ctx { t: TestApp; owner: Caller; admin: Caller; viewer: Caller; registered: Caller; outsider: Caller; workspaceId: string }

const test = suite<Ctx>('member invitations');

test.before(async (ctx) => {
  ctx.t = await startTestApp();
  ctx.owner = await newCaller(ctx.t, 'owner@invite.test');
  ctx.admin = await newCaller(ctx.t, 'admin@invite.test');
  ctx.viewer = await newCaller(ctx.t, 'viewer@invite.test');
  ctx.registered = await newCaller(ctx.t, 'registered@invite.test');
  ctx.outsider = await newCaller(ctx.t, 'outsider@invite.test');
  ({ workspaceId: ctx.workspaceId } = await workspaceWithProject(ctx.t, ctx.owner));
  for (const [who, role] of [[ctx.admin, 'admin'], [ctx.viewer, 'viewer']] as const) {
    const invited = await call(ctx.t, 'POST', `/v1/workspaces/${ctx.workspaceId}/members`, { as: ctx.owner, body: { email: who.email, role } });
    await call(ctx.t, 'POST', `/v1/invitations/${invited.json().id}/accept`, { as: who });
  }
});

test.after(async (ctx) => {
  await ctx.t.close();
});

const invite = (ctx: Ctx, email: string, role = 'viewer', as: Caller = ctx.owner) =>
  call(ctx.t, 'POST', `/v1/workspaces/${ctx.workspaceId}/members`, { as, body: { email, role } });

const memberEmails = async (ctx: Ctx) =>
  (await call(ctx.t, 'GET', `/v1/workspaces/${ctx.workspaceId}`, { as: ctx.owner })).json().members.map((m: { email: string }) => m.email).sort();

test('a registered email and an unknown one get the same answer, and neither becomes a member', async (ctx) => {
  const before = await memberEmails(ctx);
  const registered = await invite(ctx, ctx.registered.email);
  const unknown = await invite(ctx, 'nobody-here@invite.test');
  for (const response of [registered, unknown]) assert.is(response.statusCode, 201, response.body);
  const shape = (body: Record<string, unknown>) => ({ ...body, id: typeof body.id, email: typeof body.email, createdAt: typeof body.createdAt, expiresAt: typeof body.expiresAt });
  assert.equal(shape(registered.json()), shape(unknown.json()));
  assert.equal(Object.keys(registered.json()).sort(), ['createdAt', 'email', 'expiresAt', 'id', 'role', 'status', 'workspaceId', 'workspaceName']);
  assert.is(registered.json().status, 'pending');
  // No one was added without consent; the registered user is not a member and cannot read the workspace.
  assert.equal(await memberEmails(ctx), before);
  assert.is((await call(ctx.t, 'GET', `/v1/workspaces/${ctx.workspaceId}`, { as: ctx.registered })).statusCode, 403);
  assert.equal((await call(ctx.t, 'GET', '/v1/workspaces', { as: ctx.registered })).json().workspaces, []);
  // The inviter sees both as pending.
  const pending = (await call(ctx.t, 'GET', `/v1/workspaces/${ctx.workspaceId}`, { as: ctx.owner })).json().invitations.map((i: { email: string }) => i.email);
  assert.ok(pending.includes('registered@invite.test') && pending.includes('nobody-here@invite.test'), JSON.stringify(pending));
});

test('the invited user sees the invitation, and only they can accept it', async (ctx) => {
  const invitation = (await invite(ctx, ctx.registered.email, 'developer')).json();
  const mine = (await call(ctx.t, 'GET', '/v1/invitations', { as: ctx.registered })).json().invitations;
  assert.equal(mine.map((i: { id: string; workspaceId: string; role: string }) => [i.id, i.workspaceId, i.role]), [[invitation.id, ctx.workspaceId, 'developer']]);
  assert.equal((await call(ctx.t, 'GET', '/v1/invitations', { as: ctx.outsider })).json().invitations, []);
  for (const who of [ctx.outsider, ctx.owner, ctx.admin]) {
    const stolen = await call(ctx.t, 'POST', `/v1/invitations/${invitation.id}/accept`, { as: who });
    assert.is(stolen.statusCode, 404, `${who.email}: ${stolen.body}`);
  }
  assert.is(errorCode(await call(ctx.t, 'POST', '/v1/invitations/inv_00000000000000000000000000000000/accept', { as: ctx.registered })), 'not_found');
  const accepted = await call(ctx.t, 'POST', `/v1/invitations/${invitation.id}/accept`, { as: ctx.registered });
  assert.is(accepted.statusCode, 200, accepted.body);
  assert.is(accepted.json().role, 'developer');
  assert.ok((await memberEmails(ctx)).includes('registered@invite.test'));
  assert.not.ok((await call(ctx.t, 'GET', `/v1/workspaces/${ctx.workspaceId}`, { as: ctx.owner })).json().invitations.some((i: { email: string }) => i.email === 'registered@invite.test'));
});

test('an invitation waits for an account the operator creates later', async (ctx) => {
  const invitation = (await invite(ctx, 'Later@Invite.test')).json();
  assert.is(invitation.email, 'later@invite.test');
  await createUser(ctx.t.ctx.documents, { email: 'later@invite.test', password: PASSWORD }, ctx.t.ctx.now());
  const later = await signIn(ctx.t, 'later@invite.test');
  assert.equal((await call(ctx.t, 'GET', '/v1/invitations', { as: later })).json().invitations.map((i: { id: string }) => i.id), [invitation.id]);
  assert.is((await call(ctx.t, 'POST', `/v1/invitations/${invitation.id}/accept`, { as: later })).statusCode, 200);
});

test('inviting again renews the one invitation; admins may not invite owners', async (ctx) => {
  const first = (await invite(ctx, 'twice@invite.test', 'viewer')).json();
  const second = await invite(ctx, 'twice@invite.test', 'developer', ctx.admin);
  assert.is(second.statusCode, 201);
  assert.is(second.json().id, first.id);
  assert.is(second.json().role, 'developer');
  const listed = (await call(ctx.t, 'GET', `/v1/workspaces/${ctx.workspaceId}`, { as: ctx.owner })).json().invitations.filter((i: { email: string }) => i.email === 'twice@invite.test');
  assert.is(listed.length, 1);
  const asOwner = await invite(ctx, 'boss@invite.test', 'owner', ctx.admin);
  assert.is(asOwner.statusCode, 403);
  assert.is(errorCode(asOwner), 'forbidden');
  assert.is((await invite(ctx, 'boss@invite.test', 'viewer', ctx.viewer)).statusCode, 403);
});

test('the invited user declines, an admin revokes; a viewer may not, and others learn nothing (404)', async (ctx) => {
  const declined = (await invite(ctx, ctx.outsider.email)).json();
  const byViewer = await call(ctx.t, 'DELETE', `/v1/invitations/${declined.id}`, { as: ctx.viewer });
  assert.is(byViewer.statusCode, 403);
  const byStranger = await call(ctx.t, 'DELETE', `/v1/invitations/${declined.id}`, { as: await newCaller(ctx.t, 'stranger@invite.test') });
  assert.is(byStranger.statusCode, 404);
  const decline = await call(ctx.t, 'DELETE', `/v1/invitations/${declined.id}`, { as: ctx.outsider });
  assert.equal([decline.statusCode, decline.json()], [200, { deleted: true, id: declined.id }]);
  assert.is((await call(ctx.t, 'POST', `/v1/invitations/${declined.id}/accept`, { as: ctx.outsider })).statusCode, 404);

  const revoked = (await invite(ctx, 'revoked@invite.test')).json();
  assert.is((await call(ctx.t, 'DELETE', `/v1/invitations/${revoked.id}`, { as: ctx.admin })).statusCode, 200);
  assert.is((await call(ctx.t, 'DELETE', `/v1/invitations/${revoked.id}`, { as: ctx.admin })).statusCode, 404);
  assert.not.ok((await call(ctx.t, 'GET', `/v1/workspaces/${ctx.workspaceId}`, { as: ctx.owner })).json().invitations.some((i: { id: string }) => i.id === revoked.id));
});

test('an invitation lapses after 14 days', async (ctx) => {
  const lapsing = await newCaller(ctx.t, 'lapsing@invite.test');
  const invitation = (await invite(ctx, lapsing.email)).json();
  assert.is(Date.parse(invitation.expiresAt) - Date.parse(invitation.createdAt), 14 * 24 * 60 * 60 * 1000);
  ctx.t.clock.advance(14 * 24 * 60 * 60 * 1000 + 1000);
  const session = await signIn(ctx.t, lapsing.email);
  assert.equal((await call(ctx.t, 'GET', '/v1/invitations', { as: session })).json().invitations, []);
  assert.is((await call(ctx.t, 'POST', `/v1/invitations/${invitation.id}/accept`, { as: session })).statusCode, 404);
  const owner = await signIn(ctx.t, ctx.owner.email);
  assert.not.ok((await call(ctx.t, 'GET', `/v1/workspaces/${ctx.workspaceId}`, { as: owner })).json().invitations.some((i: { id: string }) => i.id === invitation.id));
});

test.run();
