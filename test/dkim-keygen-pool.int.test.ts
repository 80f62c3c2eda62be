// Creating a sending domain and starting a DKIM rotation make a 2048-bit RSA key. Made on libuv's
// thread pool, where the durable commit before every 202 waits for its fdatasync
// (infra/sqlite/group-commit.ts), 64 of them at once from one workspace held another tenant's
// POST /v1/emails for seconds. Keys are made on a thread of their own (infra/dns/dkim-keys.ts),
// a few at a time per workspace, the rest refused with 503; concurrent rotation starts of one
// domain are refused with 409 before any key is made.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { LightMyRequestResponse } from 'fastify';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant } from './support/delivery.ts';
import { call, errorCode, newCaller, workspaceWithProject } from './support/management.ts';

const test = suite<{ t: TestApp }>('DKIM key generation vs. other tenants\' sends');

/** How much slower than its baseline a send may be while another workspace makes keys. */
const ALLOWED_EXTRA_MS = 500;

test.before(async (ctx) => {
  ctx.t = await startTestApp();
});
test.after(async (ctx) => {
  await ctx.t.close();
});

async function timedSend(t: TestApp, key: string, domain: string, n: number): Promise<number> {
  const started = performance.now();
  const response = await t.app.inject({
    method: 'POST', url: '/v1/emails', headers: { authorization: `Bearer ${key}` },
    payload: { from: `a@${domain}`, to: `b${n}@${domain}`, subject: `s${n}`, text: 'hi' },
  });
  assert.is(response.statusCode, 202, response.body);
  return performance.now() - started;
}

async function baselineOf(t: TestApp, key: string, domain: string): Promise<number> {
  let worst = 0;
  for (let i = 0; i < 5; i++) worst = Math.max(worst, await timedSend(t, key, domain, i));
  return worst;
}

function assertBusy(response: LightMyRequestResponse): void {
  assert.is(response.statusCode, 503, response.body);
  assert.is(errorCode(response), 'service_unavailable');
  assert.is(response.headers['retry-after'], '1');
}

test('one workspace creating 64 domains at once: another tenant\'s sends are not held, its creations beyond its share are 503 with Retry-After, another workspace still creates', async ({ t }) => {
  const victim = await deliveryTenant(t, 'victim.example.test');
  const base = await baselineOf(t, victim.key, victim.domain);
  const flooder = await newCaller(t, 'dev@flood.test');
  const { workspaceId } = await workspaceWithProject(t, flooder);
  const neighbour = await newCaller(t, 'dev@neighbour.test');
  const { workspaceId: neighbourWorkspace } = await workspaceWithProject(t, neighbour);

  const names = Array.from({ length: 64 }, (_, i) => `d${i}.flood.test`);
  const flood = names.map((name) => call(t, 'POST', `/v1/workspaces/${workspaceId}/domains`, { as: flooder, body: { name } }));
  const neighbours = call(t, 'POST', `/v1/workspaces/${neighbourWorkspace}/domains`, { as: neighbour, body: { name: 'mine.neighbour.test' } });
  const during: number[] = [];
  for (let i = 0; i < 3; i++) during.push(await timedSend(t, victim.key, victim.domain, 100 + i));
  const answers = await Promise.all(flood);

  const created = answers.filter((a) => a.statusCode === 201);
  const refused = answers.filter((a) => a.statusCode !== 201);
  assert.ok(created.length > 0, 'some of the flood\'s domains were created');
  assert.ok(refused.length > 0, 'the flood went past its workspace\'s share');
  for (const answer of refused) assertBusy(answer);
  assert.is((await neighbours).statusCode, 201, 'another workspace\'s creation has a line of its own');
  const worst = Math.max(...during);
  assert.ok(worst < base + ALLOWED_EXTRA_MS, `a send took ${worst.toFixed(0)} ms while another workspace created 64 domains (baseline ${base.toFixed(0)} ms)`);

  // Refused, nothing was kept: asked again once the flood is over, the name is created.
  const refusedName = names[answers.indexOf(refused[0])];
  const again = await call(t, 'POST', `/v1/workspaces/${workspaceId}/domains`, { as: flooder, body: { name: refusedName } });
  assert.is(again.statusCode, 201, again.body);
});

test('64 rotation starts of one domain at once: one makes a key (201), the others are 409 before making one, and another tenant\'s sends are not held', async ({ t }) => {
  const victim = await deliveryTenant(t, 'victim2.example.test');
  const base = await baselineOf(t, victim.key, victim.domain);
  const owner = await newCaller(t, 'dev@rotations.test');
  const { workspaceId } = await workspaceWithProject(t, owner);
  const domain = await call(t, 'POST', `/v1/workspaces/${workspaceId}/domains`, { as: owner, body: { name: 'rotate.other.test' } });
  assert.is(domain.statusCode, 201, domain.body);
  const domainId = domain.json().id as string;
  const busy = await newCaller(t, 'dev@busy.test');
  const { workspaceId: busyWorkspace } = await workspaceWithProject(t, busy);

  // Another workspace keeps the key thread busy, so that starts which each went for a key would
  // queue behind it, and past this workspace's line be refused with 503.
  const busyCreations = Array.from({ length: 8 }, (_, i) => call(t, 'POST', `/v1/workspaces/${busyWorkspace}/domains`, { as: busy, body: { name: `b${i}.busy.test` } }));
  const flood = Array.from({ length: 64 }, () => call(t, 'POST', `/v1/domains/${domainId}/dkim-rotation`, { as: owner }));
  const during = await timedSend(t, victim.key, victim.domain, 200);
  const answers = await Promise.all(flood);
  await Promise.all(busyCreations);

  const started = answers.filter((a) => a.statusCode === 201);
  assert.is(started.length, 1, answers.map((a) => a.statusCode).join(' '));
  // Not 503: the losers never went for a key.
  const losers = answers.filter((a) => a.statusCode !== 201);
  assert.ok(losers.every((a) => a.statusCode === 409 && errorCode(a) === 'conflict'), losers.map((a) => a.statusCode).join(' '));
  assert.ok(during < base + ALLOWED_EXTRA_MS, `a send took ${during.toFixed(0)} ms while another workspace started 64 rotations of one domain (baseline ${base.toFixed(0)} ms)`);

  const pending = (await call(t, 'GET', `/v1/domains/${domainId}`, { as: owner })).json();
  assert.is(pending.dkimRotation.selector, started[0].json().dkimRotation.selector);
  // The winner's claim ended with its start: the next start after a cancel need not wait for it to lapse.
  assert.is((await call(t, 'DELETE', `/v1/domains/${domainId}/dkim-rotation`, { as: owner })).statusCode, 200);
  const next = await call(t, 'POST', `/v1/domains/${domainId}/dkim-rotation`, { as: owner });
  assert.is(next.statusCode, 201, next.body);
});

test.run();
