// A member's dashboard test sends ("send a test", POST /v1/templates/:id/test) are charged
// under the member's user id in every project of the workspace. Only their test sends in
// development projects count toward the development allowance they have there (spec, Limits:
// the development cap; apps/api/INTERFACE-DECISIONS.md): production test sends count toward
// the workspace alone. The month's usage (GET /v1/workspaces/:id/usage) shows the member's
// development test sends with that allowance as their limit, and their production ones apart.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { connectDomain } from '../apps/services/management/domains.ts';
import { REUSE_MS } from '../apps/services/management/reused-reads.ts';
import { setWorkspaceActivation, setWorkspaceAllowances } from '../apps/services/management/workspaces.ts';
import { call, errorCode } from './support/management.ts';
import { createTemplateAs, templates, templateWorld, type TemplateWorld } from './support/templates.ts';

const test = suite('member test sends: development allowance');
let world: TemplateWorld;
test.before(async () => {
  world = await templateWorld('embedded');
});
test.after(async () => world.t.close());

interface UsageRow { apiKeyId: string; environment: string | null; used: number; limit: number | null }

test('production test sends leave the member\'s development allowance whole; usage shows it as the limit of their development test sends', async () => {
  const { t, owner, workspaceId, domain } = world;
  // A production project of the same workspace, activated, sending from the same verified domain.
  const created = await call(t, 'POST', `/v1/workspaces/${workspaceId}/projects`, { as: owner, body: { name: 'Live', environment: 'production' } });
  assert.is(created.statusCode, 201, created.body);
  const liveProjectId = created.json().id as string;
  await setWorkspaceActivation(t.ctx.documents, workspaceId, true, t.ctx.now());
  const [domainDoc] = await t.ctx.documents.collection<{ _id: string; name: string }>(COLLECTIONS.domains).find({ where: { workspaceId, name: domain } });
  await connectDomain(t.ctx.documents, domainDoc._id, liveProjectId);
  // A development allowance of 1 recipient (relay workspace quota), to reach it at once; seen once REUSE_MS passed.
  await setWorkspaceAllowances(t.ctx.documents, workspaceId, { developmentKeyRecipients: 1 });
  await new Promise((resolve) => setTimeout(resolve, REUSE_MS + 20));

  const live = await createTemplateAs(world, { slug: 'live-welcome', subject: 'Hi', text: 'Hello' }, owner, liveProjectId);
  const dev = await createTemplateAs(world, { slug: 'dev-welcome', subject: 'Hi', text: 'Hello' }, owner, world.projectId);
  const body = { from: `hello@${domain}`, to: `ann@${domain}` };

  for (let i = 0; i < 2; i++) {
    const liveSend = await templates(t, 'POST', `/v1/templates/${live.id}/test`, { as: owner, projectId: liveProjectId, body });
    assert.is(liveSend.statusCode, 202, liveSend.body);
    assert.is(liveSend.json().test_mode, false);
  }
  const devSend = await templates(t, 'POST', `/v1/templates/${dev.id}/test`, { as: owner, projectId: world.projectId, body });
  assert.is(devSend.statusCode, 202, `the first development test send of the month: ${devSend.body}`);
  const pastCap = await templates(t, 'POST', `/v1/templates/${dev.id}/test`, { as: owner, projectId: world.projectId, body });
  assert.is(pastCap.statusCode, 429, pastCap.body);
  assert.is(errorCode(pastCap), 'quota_exceeded');
  assert.match(pastCap.json().error.message, /development key's monthly allowance of 1 recipients is used up \(1 used, 1 requested\)/);

  const usage = (await call(t, 'GET', `/v1/workspaces/${workspaceId}/usage`, { as: owner })).json();
  assert.is(usage.recipients.used, 3);
  const rows = (usage.keys as UsageRow[]).filter((k) => k.apiKeyId === owner.userId);
  assert.equal(
    rows.map(({ environment, used, limit }) => ({ environment, used, limit })).sort((a, b) => String(a.environment).localeCompare(String(b.environment))),
    [{ environment: 'development', used: 1, limit: 1 }, { environment: 'production', used: 2, limit: null }],
    JSON.stringify(usage.keys),
  );
});

test.run();
