// `relay workspace quota`, run as the real CLI on the data directory of a running API: the
// monthly recipient allowance an operator sets is the one POST /v1/emails applies once
// REUSE_MS has passed (the API reuses a workspace it read for that long: the CLI is another
// process; the 5,001st recipient of a month, refused at the default, is admitted once the
// allowance is raised), a development key's cap likewise, "default" returns to the spec's, and
// members see the allowance in force in the month's usage.
import { randomUUID } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createApiKey } from '../apps/services/management/api-keys.ts';
import { connectDomain, createDomain, markDomainVerified } from '../apps/services/management/domains.ts';
import { createProject } from '../apps/services/management/projects.ts';
import { REUSE_MS } from '../apps/services/management/reused-reads.ts';
import { workspacesOf } from '../apps/services/management/workspaces.ts';
import { DEFAULT_ALLOWANCES } from '../domain/usage/quota.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, type DeliveryTenant } from './support/delivery.ts';
import { call, newCaller, workspaceWithProject } from './support/management.ts';
import { runRelay } from './support/relay-process.ts';

interface Context {
  t: TestApp;
  tenant: DeliveryTenant;
}

const test = suite<Context>('relay workspace quota');

test.before(async (ctx) => {
  ctx.t = await startTestApp();
  ctx.tenant = await deliveryTenant(ctx.t);
});

test.after(async (ctx) => {
  await ctx.t.close();
});

/** The CLI's run, returned once the API can no longer be reusing a workspace it read before the change. */
async function quota(ctx: Context, ...args: string[]): Promise<Awaited<ReturnType<typeof runRelay>>> {
  const run = await runRelay(['workspace', 'quota', ...args], { RELAY_DATA_DIR: ctx.t.config.dataDir });
  await new Promise((resolve) => setTimeout(resolve, REUSE_MS + 20));
  return run;
}

async function post(ctx: Context, key: string, to: string[], from = `hello@${ctx.tenant.domain}`): Promise<{ status: number; body: any }> {
  const response = await ctx.t.app.inject({ method: 'POST', url: '/v1/emails', headers: { authorization: `Bearer ${key}` }, payload: { from, to, subject: 'quota', text: 'hi' } });
  return { status: response.statusCode, body: response.json() };
}

/** Charges `recipients` to the tenant's workspace this month, as admissions would have. */
const alreadyUsed = (ctx: Context, recipients: number) => ctx.t.ctx.services.usage.charge({
  workspaceId: ctx.tenant.workspaceId, emailId: `em_fixture_${randomUUID()}`, fingerprint: 'fixture', apiKeyId: 'key_fixture', developmentKey: false,
  recipients, allowances: DEFAULT_ALLOWANCES, at: ctx.t.ctx.now(), origin: { correlationId: 'test', causationId: 'test' },
});

test('with 5,000 used, the next recipient is refused at the default; raised to 20,000 by the CLI, it is admitted; "default" refuses again', async (ctx) => {
  await alreadyUsed(ctx, 5_000);
  const refused = await post(ctx, ctx.tenant.key, ['ann@example.org']);
  assert.is(refused.status, 429);
  assert.is(refused.body.error.code, 'quota_exceeded');
  assert.match(refused.body.error.message, /monthly allowance of 5000 recipients/);

  const raised = await quota(ctx, ctx.tenant.workspaceId, '--recipients', '20000', '--json');
  assert.is(raised.code, 0, raised.stderr);
  const shown = JSON.parse(raised.stdout);
  assert.equal(shown.allowances, { workspaceRecipients: 20_000, developmentKeyRecipients: 1_000 });
  assert.equal(shown.set, { workspaceRecipients: 20_000 });
  assert.is(shown.used.workspaceRecipients, 5_000);
  assert.match(raised.stderr, /5,000 of 20,000 \(set by the operator\)/);

  const admitted = await post(ctx, ctx.tenant.key, ['ann@example.org']);
  assert.is(admitted.status, 202, JSON.stringify(admitted.body));

  const reset = await quota(ctx, ctx.tenant.workspaceId, '--recipients', 'default');
  assert.is(reset.code, 0, reset.stderr);
  assert.match(reset.stderr, /5,001 of 5,000 \(default\)/);
  assert.equal((await workspacesOf(ctx.t.stores.documents).get(ctx.tenant.workspaceId))!.allowances, undefined, 'nothing left set');
  assert.is((await post(ctx, ctx.tenant.key, ['bob@example.org'])).status, 429);
});

test('a development key cap of 2 set by the CLI: a third recipient of that key is refused for the key', async (ctx) => {
  const set = await quota(ctx, ctx.tenant.workspaceId, '--recipients', '100000', '--dev-key-recipients', '2');
  assert.is(set.code, 0, set.stderr);
  const documents = ctx.t.stores.documents;
  const now = ctx.t.ctx.now();
  const workspace = (await workspacesOf(documents).get(ctx.tenant.workspaceId))!;
  const project = await createProject(documents, { workspaceId: workspace._id, name: 'dev', environment: 'development' }, now);
  const domain = await createDomain(documents, { workspaceId: workspace._id, name: 'dev-quota.example.test' }, now, ctx.t.ctx.services.secrets);
  await markDomainVerified(documents, domain._id, 'test fixture', now);
  await connectDomain(documents, domain._id, project._id);
  const { secret } = await createApiKey(documents, { project, name: 'dev', permissions: ['email:send'] }, now);
  const from = 'hello@dev-quota.example.test';
  assert.is((await post(ctx, secret, ['a@dev-quota.example.test', 'b@dev-quota.example.test'], from)).status, 202);
  const third = await post(ctx, secret, ['c@dev-quota.example.test'], from);
  assert.is(third.status, 429);
  assert.match(third.body.error.message, /development key's monthly allowance of 2 recipients/);
});

test('members see the allowances the operator set in the month\'s usage (GET /v1/workspaces/:id/usage)', async (ctx) => {
  const owner = await newCaller(ctx.t, 'quota-owner@quota.test');
  const { workspaceId } = await workspaceWithProject(ctx.t, owner);
  const usage = async () => (await call(ctx.t, 'GET', `/v1/workspaces/${workspaceId}/usage`, { as: owner })).json().recipients;
  assert.equal(await usage(), { used: 0, limit: 5_000 });
  assert.is((await quota(ctx, workspaceId, '--recipients', '12345')).code, 0);
  assert.equal(await usage(), { used: 0, limit: 12_345 });
});

test('bad values are refused with the usage or a validation message, and an unknown workspace with not_found; nothing changes', async (ctx) => {
  const before = (await workspacesOf(ctx.t.stores.documents).get(ctx.tenant.workspaceId))!.allowances;
  for (const args of [['--recipients', '-1'], ['--recipients', '1.5'], ['--recipients', 'lots'], ['--dev-key-recipients', '']]) {
    const run = await quota(ctx, ctx.tenant.workspaceId, ...args);
    assert.is(run.code, 2, `${args.join(' ')}: ${run.stderr}`);
  }
  const tooMany = await quota(ctx, ctx.tenant.workspaceId, '--recipients', '1000000001');
  assert.is(tooMany.code, 1);
  assert.match(tooMany.stderr, /validation_error: workspaceRecipients: must be a whole number of recipients from 0 to 1000000000/);
  const unknown = await quota(ctx, 'ws_missing');
  assert.is(unknown.code, 1);
  assert.match(unknown.stderr, /not_found: workspace ws_missing not found/);
  assert.equal((await workspacesOf(ctx.t.stores.documents).get(ctx.tenant.workspaceId))!.allowances, before);
});

test.run();
