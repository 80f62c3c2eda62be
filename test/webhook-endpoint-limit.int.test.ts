// A project has at most MAX_ENDPOINTS_PER_PROJECT (20) webhook endpoints, also when creations
// race: each endpoint holds one of the project's slots, claimed by a unique insert
// (apps/services/webhooks/endpoints.ts). 30 concurrent creations make 20 endpoints (the rest
// 409) and the list shows each of them; deleting one frees its slot; endpoints made before
// slots existed still count; a slot whose creation died before its endpoint was stored is free
// again after a minute.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { createEndpoint, endpointsOf, MAX_ENDPOINTS_PER_PROJECT, type EndpointSlot } from '../apps/services/webhooks/endpoints.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';
import { call, errorCode, newCaller, workspaceWithProject, type Caller } from './support/management.ts';

interface Context { dns: TestDnsServer; t: TestApp; owner: Caller }
const test = suite<Context>('webhook endpoints: at most 20 per project, under concurrent creations');

test.before(async (ctx) => {
  ctx.dns = await startDnsServer([{ name: 'hooks.example.com', type: 'A', data: '8.8.8.8' }]);
  ctx.t = await startTestApp({ RELAY_DNS_SERVERS: ctx.dns.address });
  ctx.owner = await newCaller(ctx.t, 'owner@limit.test');
});
test.after(async (ctx) => {
  await ctx.t.close();
  await ctx.dns.close();
});

const create = (ctx: Context, projectId: string, i: number) =>
  call(ctx.t, 'POST', `/v1/projects/${projectId}/webhook-endpoints`, { as: ctx.owner, body: { url: `https://hooks.example.com/${i}`, events: ['email.sent'] } });
const createMany = (ctx: Context, projectId: string, n: number) => Promise.all(Array.from({ length: n }, (_, i) => create(ctx, projectId, i)));
const stored = (ctx: Context, projectId: string) => ctx.t.stores.documents.collection(COLLECTIONS.webhookEndpoints).count({ projectId });
const listed = async (ctx: Context, projectId: string): Promise<string[]> =>
  (await call(ctx.t, 'GET', `/v1/projects/${projectId}/webhook-endpoints`, { as: ctx.owner })).json().endpoints.map((e: { id: string }) => e.id);
const slots = (ctx: Context) => ctx.t.stores.documents.collection<EndpointSlot>(COLLECTIONS.webhookEndpointSlots);

test('30 concurrent creations: 20 answer 201, 10 answer 409 conflict, and the list shows the 20', async (ctx) => {
  const { projectId } = await workspaceWithProject(ctx.t, ctx.owner);
  const responses = await createMany(ctx, projectId, 30);
  const statuses = responses.map((r) => r.statusCode);
  assert.is(statuses.filter((s) => s === 201).length, MAX_ENDPOINTS_PER_PROJECT, `statuses ${statuses.join(',')}`);
  for (const refused of responses.filter((r) => r.statusCode !== 201)) {
    assert.is(refused.statusCode, 409, refused.body);
    assert.is(errorCode(refused), 'conflict');
  }
  assert.is(await stored(ctx, projectId), MAX_ENDPOINTS_PER_PROJECT);
  const created = responses.filter((r) => r.statusCode === 201).map((r) => r.json().id as string);
  assert.equal((await listed(ctx, projectId)).sort(), created.sort(), 'the list shows every endpoint the project has');
  const held = await slots(ctx).find({ where: { projectId } });
  assert.equal(held.map((s) => s.endpointId).sort(), created.sort(), 'each endpoint holds one slot');
});

test('deleting an endpoint frees its slot: the next creation takes it, the one after is refused', async (ctx) => {
  const { projectId } = await workspaceWithProject(ctx.t, ctx.owner);
  const ids = (await createMany(ctx, projectId, MAX_ENDPOINTS_PER_PROJECT)).map((r) => r.json().id as string);
  const gone = await endpointsOf(ctx.t.stores.documents).get(ids[7]);
  assert.is((await call(ctx.t, 'DELETE', `/v1/webhook-endpoints/${ids[7]}`, { as: ctx.owner })).statusCode, 200);
  assert.is(await slots(ctx).get(gone!.slot!), null, 'its slot is free');
  const again = await create(ctx, projectId, 100);
  assert.is(again.statusCode, 201, again.body);
  assert.is((await endpointsOf(ctx.t.stores.documents).get(again.json().id))?.slot, gone!.slot, 'the freed slot is taken');
  assert.is((await create(ctx, projectId, 101)).statusCode, 409);
  assert.is(await stored(ctx, projectId), MAX_ENDPOINTS_PER_PROJECT);
});

test('endpoints made before slots existed (no slot) still count, also against concurrent creations', async (ctx) => {
  const { workspaceId, projectId } = await workspaceWithProject(ctx.t, ctx.owner);
  const legacy = 15;
  for (let i = 0; i < legacy; i++) {
    const when = new Date(Date.UTC(2024, 0, 1, 0, 0, i)).toISOString();
    await endpointsOf(ctx.t.stores.documents).insert({
      _id: `whe_legacy${i}`, workspaceId, projectId, url: `https://hooks.example.com/legacy/${i}`, events: ['email.sent'], description: null,
      enabled: true, secretSealed: ctx.t.ctx.services.secrets.seal('whsec_legacy', 'webhook-signing-secret'), createdAt: when, updatedAt: when,
    });
  }
  const statuses = (await createMany(ctx, projectId, 10)).map((r) => r.statusCode);
  assert.is(statuses.filter((s) => s === 201).length, MAX_ENDPOINTS_PER_PROJECT - legacy, `statuses ${statuses.join(',')}`);
  assert.is(await stored(ctx, projectId), MAX_ENDPOINTS_PER_PROJECT);
  // Deleting one made before slots leaves room for one more.
  assert.is((await call(ctx.t, 'DELETE', '/v1/webhook-endpoints/whe_legacy3', { as: ctx.owner })).statusCode, 200);
  assert.is((await create(ctx, projectId, 50)).statusCode, 201);
  assert.is((await create(ctx, projectId, 51)).statusCode, 409);
});

test('a slot whose endpoint was never stored (its creation died) is free again a minute after it was claimed, not before', async (ctx) => {
  const { workspaceId, projectId } = await workspaceWithProject(ctx.t, ctx.owner);
  const statuses = (await createMany(ctx, projectId, MAX_ENDPOINTS_PER_PROJECT - 1)).map((r) => r.statusCode);
  assert.equal(statuses.filter((s) => s !== 201), [], 'all but one slot taken');
  const claimedAt = new Date();
  const lastSlot = `${projectId}#${MAX_ENDPOINTS_PER_PROJECT - 1}`;
  await slots(ctx).insert({ _id: lastSlot, projectId, endpointId: 'whe_never_stored', claimedAt: claimedAt.toISOString() });
  const policy = { dnsServers: [ctx.dns.address], allow: ctx.t.config.webhookAllow };
  const input = { workspaceId, projectId, url: 'https://hooks.example.com/late', events: ['email.sent'] };
  const refused = await createEndpoint(ctx.t.stores.documents, ctx.t.ctx.services.secrets, policy, input, new Date(claimedAt.getTime() + 30_000))
    .then(() => null, (error: Error & { code?: string }) => error.code);
  assert.is(refused, 'conflict', 'half a minute later the claim may still be finishing');
  const { endpoint } = await createEndpoint(ctx.t.stores.documents, ctx.t.ctx.services.secrets, policy, input, new Date(claimedAt.getTime() + 61_000));
  assert.is(endpoint.slot, lastSlot);
  assert.is((await slots(ctx).get(lastSlot))?.endpointId, endpoint._id);
});

test.run();
