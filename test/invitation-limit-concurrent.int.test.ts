// "At most 100 are pending per workspace (409)" (MANAGEMENT-API.md, Invitations) holds for
// invitations made at the same time: each takes one of the workspace's slots by a unique insert,
// so twenty concurrent invitations with room for two make exactly two. Revoking one frees its
// slot for the next invitation.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from './support/app.ts';
import { call, newCaller, workspaceWithProject, type Caller } from './support/management.ts';

interface Ctx { t: TestApp; owner: Caller }
const test = suite<Ctx>('the pending-invitation limit under concurrent invitations');
test.before(async (ctx) => {
  ctx.t = await startTestApp();
  ctx.owner = await newCaller(ctx.t, 'owner@invites.test');
});
test.after(async (ctx) => { await ctx.t.close(); });

test('twenty invitations at once, with room for two, leave at most 100 pending', async ({ t, owner }) => {
  const { workspaceId } = await workspaceWithProject(t, owner);
  for (let i = 0; i < 98; i++) {
    const r = await call(t, 'POST', `/v1/workspaces/${workspaceId}/members`, { as: owner, body: { email: `early${i}@invites.test`, role: 'viewer' } });
    assert.is(r.statusCode, 201, r.body);
  }
  const racing = await Promise.all(Array.from({ length: 20 }, (_, i) =>
    call(t, 'POST', `/v1/workspaces/${workspaceId}/members`, { as: owner, body: { email: `late${i}@invites.test`, role: 'viewer' } })));
  const statuses = racing.map((r) => r.statusCode);
  const pending = (await call(t, 'GET', `/v1/workspaces/${workspaceId}`, { as: owner })).json().invitations.length;
  assert.equal(
    { pending, created: statuses.filter((s) => s === 201).length },
    { pending: 100, created: 2 },
    `statuses of the twenty: ${JSON.stringify(statuses)}`,
  );
  const full = await call(t, 'POST', `/v1/workspaces/${workspaceId}/members`, { as: owner, body: { email: 'one-more@invites.test', role: 'viewer' } });
  assert.is(full.statusCode, 409, full.body);
  const created = racing.find((r) => r.statusCode === 201)!.json();
  const revoked = await call(t, 'DELETE', `/v1/invitations/${created.id}`, { as: owner });
  assert.is(revoked.statusCode, 200, revoked.body);
  const again = await call(t, 'POST', `/v1/workspaces/${workspaceId}/members`, { as: owner, body: { email: 'one-more@invites.test', role: 'viewer' } });
  assert.is(again.statusCode, 201, again.body);
});

test.run();
