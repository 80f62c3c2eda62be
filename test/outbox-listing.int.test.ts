// A project's outbox listing (GET /v1/projects/:p/outbox) costs what that project wrote, not what
// the whole installation did: with project B's 300 messages newer than project A's 5, A's page
// reads A's emails only (counted at the document store the API is given) and looks at A's files
// only (counted through the listing's file calls), and answers A's newest messages, newest
// first. A copy deleted meanwhile is skipped, a copy past body retention is not listed (as it is
// not served), and an unknown query parameter is refused.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { readdirSync, statSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { BODY_RETENTION_MS } from '../apps/services/content-vault.ts';
import { markDomainVerified } from '../apps/services/management/domains.ts';
import { setWorkspaceActivation } from '../apps/services/management/workspaces.ts';
import { projectOutboxMessages, type OutboxFiles } from '../apps/services/outbox.ts';
import type { Collection, DocumentStore } from '../infra/ports/document-store.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { send, waitForDetail } from './support/delivery.ts';
import { waitUntil } from './support/eventually.ts';
import { call, errorCode, newCaller, type Caller } from './support/management.ts';

const A_COUNT = 5;
const B_COUNT = 300;

interface Tenant { projectId: string; key: string; domain: string }

interface Context {
  t: TestApp;
  owner: Caller;
  outbox: string;
  a: Tenant;
  b: Tenant;
  /** A's emails, oldest first. */
  aIds: string[];
  bIds: string[];
}

const test = suite<Context>('outbox listing: one project\'s cost');

async function must(response: Promise<{ statusCode: number; body: string; json(): any }>, status: number) {
  const r = await response;
  if (r.statusCode !== status) throw new Error(`fixture: ${r.statusCode} ${r.body}`);
  return r.json();
}

/** A production project (an activated workspace: B sends faster than a development key may) with its own verified domain. */
async function tenant(t: TestApp, owner: Caller, name: string): Promise<Tenant> {
  const domain = `${name}.outbox-listing.test`;
  const workspaceId = (await must(call(t, 'POST', '/v1/workspaces', { as: owner, body: { name } }), 201)).id;
  await setWorkspaceActivation(t.ctx.documents, workspaceId, true, t.ctx.now());
  const projectId = (await must(call(t, 'POST', `/v1/workspaces/${workspaceId}/projects`, { as: owner, body: { name, environment: 'production' } }), 201)).id;
  const domainId = (await must(call(t, 'POST', `/v1/workspaces/${workspaceId}/domains`, { as: owner, body: { name: domain } }), 201)).id;
  await markDomainVerified(t.ctx.documents, domainId, 'test domain', t.ctx.now());
  await must(call(t, 'POST', `/v1/domains/${domainId}/projects/${projectId}`, { as: owner }), 200);
  const key = (await must(call(t, 'POST', `/v1/projects/${projectId}/api-keys`, { as: owner, body: { name: 'k', permissions: ['email:send', 'email:read'] } }), 201)).secret;
  return { projectId, key, domain };
}

const sendTo = (t: TestApp, tenant: Tenant, subject: string) =>
  send(t, tenant.key, { from: `app@${tenant.domain}`, to: `ann@${tenant.domain}`, subject, text: `the body of ${subject}` });

/** Counts the emails (read model documents) the API reads while `work` runs. */
async function emailReadsDuring<T>(t: TestApp, work: () => Promise<T>): Promise<{ result: T; reads: number }> {
  const real = t.ctx.documents;
  let reads = 0;
  const counted = (collection: Collection<any>): Collection<any> => new Proxy(collection, {
    get(target, property) {
      if (property === 'get') return async (id: string) => (reads++, target.get(id));
      if (property === 'find') return async (options: any) => {
        const found = await target.find(options);
        reads += found.length;
        return found;
      };
      const value = Reflect.get(target, property);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  t.ctx.documents = new Proxy(real, {
    get(target, property) {
      if (property === 'collection') return (name: string) => (name === COLLECTIONS.emails ? counted(target.collection(name)) : target.collection(name));
      const value = Reflect.get(target, property);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  }) as DocumentStore;
  try {
    return { result: await work(), reads };
  } finally {
    t.ctx.documents = real;
  }
}

const listing = (ctx: Context, projectId: string, query = '') => call(ctx.t, 'GET', `/v1/projects/${projectId}/outbox${query}`, { as: ctx.owner });

test.before(async (ctx) => {
  ctx.t = await startTestApp({}, { processors: true });
  ctx.outbox = join(ctx.t.config.dataDir, 'outbox');
  ctx.owner = await newCaller(ctx.t, 'owner@outbox-listing.test');
  ctx.a = await tenant(ctx.t, ctx.owner, 'alpha');
  ctx.b = await tenant(ctx.t, ctx.owner, 'beta');
  ctx.aIds = [];
  for (let i = 0; i < A_COUNT; i++) {
    ctx.aIds.push(await sendTo(ctx.t, ctx.a, `A ${i}`));
    ctx.t.clock.advance(1_000); // one email per second of the API's clock: "newest" is never a tie
  }
  for (const id of ctx.aIds) await waitForDetail(ctx.t, ctx.a.key, id, (d) => d.status === 'sent', 'A\'s email is sent');
  // B's, all newer than A's: a scan of the outbox newest first meets every one of them before A's.
  ctx.bIds = [];
  for (let i = 0; i < B_COUNT; i += 50) {
    ctx.bIds.push(...await Promise.all(Array.from({ length: Math.min(50, B_COUNT - i) }, (_, n) => sendTo(ctx.t, ctx.b, `B ${i + n}`))));
    ctx.t.clock.advance(1_000); // within the key's 100 sends a second
  }
  await waitUntil(() => readdirSync(ctx.outbox).filter((name) => name.endsWith('.eml')).length === A_COUNT + B_COUNT, 'every message is in the outbox', 60_000);
});

test.after(async (ctx) => {
  await ctx.t.close();
});

test('A\'s page is A\'s newest messages, newest first, read from A\'s emails only', async (ctx) => {
  const { result: response, reads } = await emailReadsDuring(ctx.t, () => listing(ctx, ctx.a.projectId, '?limit=3'));
  assert.is(response.statusCode, 200, response.body);
  const body = response.json();
  assert.is(body.transport, 'outbox');
  const newestThree = ctx.aIds.slice(-3).reverse();
  assert.equal(body.messages.map((m: { emailId: string }) => m.emailId), newestThree);
  const [first] = body.messages;
  assert.equal(Object.keys(first).sort(), ['createdAt', 'emailId', 'size', 'subject', 'toAddresses', 'writtenAt']);
  assert.is(first.subject, `A ${A_COUNT - 1}`);
  assert.equal(first.toAddresses, ['ann@alpha.outbox-listing.test']);
  const file = statSync(join(ctx.outbox, `${first.emailId}.eml`));
  assert.is(first.size, file.size);
  assert.is(first.writtenAt, file.mtime.toISOString());
  assert.ok(reads <= 3, `the page read ${reads} emails for 3 messages (the outbox holds ${A_COUNT + B_COUNT})`);

  const all = await emailReadsDuring(ctx.t, () => listing(ctx, ctx.a.projectId));
  assert.equal(all.result.json().messages.map((m: { emailId: string }) => m.emailId), [...ctx.aIds].reverse());
  assert.ok(all.reads <= A_COUNT, `the default page read ${all.reads} emails for A's ${A_COUNT}`);
});

test('the listing looks at the files of the project\'s own emails only', async (ctx) => {
  const looked: string[] = [];
  const files: OutboxFiles = { stat: async (path) => (looked.push(path), statSync(path)) };
  const messages = await projectOutboxMessages(ctx.t.ctx.documents, ctx.outbox, ctx.a.projectId, { limit: 3, now: ctx.t.ctx.now() }, files);
  assert.equal(messages.map((m) => m.emailId), ctx.aIds.slice(-3).reverse());
  assert.equal(looked, ctx.aIds.slice(-3).reverse().map((id) => join(ctx.outbox, `${id}.eml`)));
});

test('a project whose emails have no copy (another transport) looks at a bounded number of them', async (ctx) => {
  const looked: string[] = [];
  const none: OutboxFiles = { stat: async (path) => { looked.push(path); throw Object.assign(new Error(`ENOENT: ${path}`), { code: 'ENOENT' }); } };
  const messages = await projectOutboxMessages(ctx.t.ctx.documents, ctx.outbox, ctx.b.projectId, { limit: 50, now: ctx.t.ctx.now(), maxExamined: 120 }, none);
  assert.equal(messages, []);
  assert.is(looked.length, 120, `looked at ${looked.length} of B's ${B_COUNT} emails`);
});

test('B\'s page holds B\'s messages only', async (ctx) => {
  const response = await listing(ctx, ctx.b.projectId, '?limit=100');
  assert.is(response.statusCode, 200, response.body);
  const ids: string[] = response.json().messages.map((m: { emailId: string }) => m.emailId);
  assert.is(ids.length, 100);
  const bs = new Set(ctx.bIds);
  assert.ok(ids.every((id) => bs.has(id)), 'every message listed is B\'s');
});

test('an unknown query parameter is refused on both outbox routes', async (ctx) => {
  for (const path of [`/v1/projects/${ctx.a.projectId}/outbox?unknown=1`, `/v1/projects/${ctx.a.projectId}/outbox/${ctx.aIds[0]}?unknown=1`]) {
    const response = await call(ctx.t, 'GET', path, { as: ctx.owner });
    assert.is(response.statusCode, 400, `${path}: ${response.body}`);
    assert.is(errorCode(response), 'validation_error');
    assert.match(response.json().error.message, 'query.unknown');
  }
  // Without it, both answer.
  assert.is((await listing(ctx, ctx.a.projectId)).statusCode, 200);
  assert.is((await call(ctx.t, 'GET', `/v1/projects/${ctx.a.projectId}/outbox/${ctx.aIds[0]}`, { as: ctx.owner })).statusCode, 200);
});

test('a copy deleted meanwhile is skipped: the page fills with the next ones', async (ctx) => {
  const newest = ctx.aIds[A_COUNT - 1];
  unlinkSync(join(ctx.outbox, `${newest}.eml`));
  const response = await listing(ctx, ctx.a.projectId, '?limit=3');
  assert.is(response.statusCode, 200, response.body);
  assert.equal(response.json().messages.map((m: { emailId: string }) => m.emailId), ctx.aIds.slice(-4, -1).reverse());
});

test('past body retention a project\'s copies are not listed, even before the sweep deletes them', async (ctx) => {
  const aNewest = (await listing(ctx, ctx.a.projectId, '?limit=1')).json().messages[0];
  // Just past the retention of A's newest email, within that of B's (admitted a second of the API's clock later).
  ctx.t.clock.freeze(new Date(Date.parse(aNewest.createdAt) + BODY_RETENTION_MS + 500));
  assert.ok(readdirSync(ctx.outbox).includes(`${aNewest.emailId}.eml`), 'the copy is still on disk');
  const a = await listing(ctx, ctx.a.projectId);
  assert.is(a.statusCode, 200, a.body);
  assert.equal(a.json().messages, []);
  assert.is((await call(ctx.t, 'GET', `/v1/projects/${ctx.a.projectId}/outbox/${aNewest.emailId}`, { as: ctx.owner })).statusCode, 410, 'the copy is not served either');
  assert.is((await listing(ctx, ctx.b.projectId, '?limit=100')).json().messages.length, 100);
});

test.run();
