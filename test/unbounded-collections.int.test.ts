// What one tenant may have (MANAGEMENT-API.md, Limits): 100 live API keys and 1,000 templates per
// project, 100 projects per workspace, 10 workspaces per creator. Each limit is a 409 conflict
// naming it, and holds for creations made at the same time (each thing holds one of its owner's
// slots, claimed by a unique insert: apps/services/slots.ts); revoking a key or deleting a
// template makes room. The key list shows every live key and pages the revoked ones, which are
// kept without bound. Before, 1,001 of each were created without refusal, and 20,000 keys made
// one list answer of 5.7 MB.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { LightMyRequestResponse } from 'fastify';
import { apiKeysOf, createApiKey, MAX_LIVE_KEYS_PER_PROJECT } from '../apps/services/management/api-keys.ts';
import { MAX_PROJECTS_PER_WORKSPACE, projectsOf } from '../apps/services/management/projects.ts';
import { MAX_WORKSPACES_PER_CREATOR } from '../apps/services/management/workspaces.ts';
import { MAX_TEMPLATES_PER_PROJECT } from '../apps/services/templates/templates.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { addMember, call, errorCode, newCaller, workspaceWithProject, type Caller } from './support/management.ts';

interface Ctx { t: TestApp }
const test = suite<Ctx>('per-tenant limits of keys, projects, workspaces and templates; the key list pages revoked keys');

test.before(async (ctx) => {
  ctx.t = await startTestApp();
});
test.after(async (ctx) => {
  await ctx.t.close();
});

interface Key { id: string; name: string; createdAt: string; revokedAt: string | null }

/** `count` creations, `batch` at a time: their statuses in order. */
async function createAll(count: number, batch: number, create: (i: number) => Promise<LightMyRequestResponse>): Promise<LightMyRequestResponse[]> {
  const answers: LightMyRequestResponse[] = [];
  for (let start = 0; start < count; start += batch) {
    answers.push(...await Promise.all(Array.from({ length: Math.min(batch, count - start) }, (_, j) => create(start + j))));
  }
  return answers;
}

/** Exactly `created` answered 201 and the rest 409 conflict with `message`. */
function assertRefusedPast(answers: LightMyRequestResponse[], created: number, message: RegExp): void {
  const statuses = answers.map((a) => a.statusCode);
  assert.is(statuses.filter((s) => s === 201).length, created, `statuses ${JSON.stringify(statuses)}`);
  for (const refused of answers.filter((a) => a.statusCode !== 201)) {
    assert.is(refused.statusCode, 409, refused.body);
    assert.is(errorCode(refused), 'conflict');
    assert.match(refused.json().error.message, message);
  }
}

const createKey = (t: TestApp, as: Caller, projectId: string, name: string) =>
  call(t, 'POST', `/v1/projects/${projectId}/api-keys`, { as, body: { name, permissions: ['email:send'] } });
const listKeys = async (t: TestApp, as: Caller, projectId: string, query = '') => {
  const answer = await call(t, 'GET', `/v1/projects/${projectId}/api-keys${query}`, { as });
  assert.is(answer.statusCode, 200, answer.body);
  return answer.json() as { apiKeys: Key[]; next_cursor: string | null };
};

test(`a project has at most ${MAX_LIVE_KEYS_PER_PROJECT} live API keys, also when creations race; revoking one makes room`, async ({ t }) => {
  const dev = await newCaller(t, 'dev@keys.test');
  const { projectId } = await workspaceWithProject(t, dev);
  const answers = await createAll(MAX_LIVE_KEYS_PER_PROJECT + 20, 40, (i) => createKey(t, dev, projectId, `k${i}`));
  assertRefusedPast(answers, MAX_LIVE_KEYS_PER_PROJECT, /a project has at most 100 live API keys; revoke one/);
  const created = answers.filter((a) => a.statusCode === 201).map((a) => a.json() as Key);
  assert.equal((await listKeys(t, dev, projectId)).apiKeys.map((k) => k.id).sort(), created.map((k) => k.id).sort());

  const revoked = await call(t, 'DELETE', `/v1/api-keys/${created[7].id}`, { as: dev });
  assert.is(revoked.statusCode, 200, revoked.body);
  assert.equal((await createAll(3, 3, (i) => createKey(t, dev, projectId, `again${i}`))).map((a) => a.statusCode).sort(), [201, 409, 409]);
  // Revoking it twice frees nothing more.
  assert.is((await call(t, 'DELETE', `/v1/api-keys/${created[7].id}`, { as: dev })).statusCode, 200);
  assert.is((await createKey(t, dev, projectId, 'one more')).statusCode, 409);
});

test('the key list: every live key, oldest first, then the revoked ones, most recently revoked first, `limit` a page', async ({ t }) => {
  const dev = await newCaller(t, 'dev@key-pages.test');
  const { projectId } = await workspaceWithProject(t, dev);
  const keys: Key[] = [];
  for (let i = 0; i < 12; i++) keys.push((await createKey(t, dev, projectId, `k${i}`)).json());
  // Revoked one after the other, so that each has its own revocation time (ties are ordered by id).
  const revokedInOrder: Key[] = [];
  for (const key of [keys[3], keys[0], keys[9], keys[5], keys[11]]) {
    revokedInOrder.push((await call(t, 'DELETE', `/v1/api-keys/${key.id}`, { as: dev })).json());
  }
  const live = keys.filter((k) => !revokedInOrder.some((r) => r.id === k.id))
    .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id)).map((k) => k.id);
  const newestRevokedFirst = [...revokedInOrder]
    .sort((a, b) => b.revokedAt!.localeCompare(a.revokedAt!) || b.id.localeCompare(a.id)).map((k) => k.id);

  const first = await listKeys(t, dev, projectId, '?limit=2');
  assert.equal(first.apiKeys.map((k) => k.id), [...live, ...newestRevokedFirst.slice(0, 2)], 'the live keys in full, then two revoked');
  const second = await listKeys(t, dev, projectId, `?limit=2&cursor=${first.next_cursor}`);
  assert.equal(second.apiKeys.map((k) => k.id), newestRevokedFirst.slice(2, 4), 'a later page holds revoked keys only');
  const last = await listKeys(t, dev, projectId, `?limit=2&cursor=${second.next_cursor}`);
  assert.equal(last.apiKeys.map((k) => k.id), newestRevokedFirst.slice(4));
  assert.is(last.next_cursor, null);

  const whole = await listKeys(t, dev, projectId);
  assert.equal(whole.apiKeys.map((k) => k.id), [...live, ...newestRevokedFirst], 'without a limit, up to 50 revoked keys');
  assert.is(whole.next_cursor, null);

  const liveCursor = await call(t, 'GET', `/v1/projects/${projectId}/api-keys?cursor=${live[0]}`, { as: dev });
  assert.is(liveCursor.statusCode, 400, liveCursor.body);
  assert.match(liveCursor.json().error.message, /^query\.cursor: /);
  const outsider = await newCaller(t, 'other@key-pages.test');
  const other = await workspaceWithProject(t, outsider);
  const foreign = (await createKey(t, outsider, other.projectId, 'theirs')).json().id as string;
  assert.is((await call(t, 'DELETE', `/v1/api-keys/${foreign}`, { as: outsider })).statusCode, 200);
  for (const cursor of [foreign, 'key_none']) {
    const unknown = await call(t, 'GET', `/v1/projects/${projectId}/api-keys?cursor=${cursor}`, { as: dev });
    assert.is(unknown.statusCode, 404, unknown.body);
  }
});

test('live keys made before the limit existed (no slot) count; a slot left by a revocation that died is freed by the next creation', async ({ t }) => {
  const dev = await newCaller(t, 'dev@legacy-keys.test');
  const { workspaceId, projectId } = await workspaceWithProject(t, dev);
  const legacy = MAX_LIVE_KEYS_PER_PROJECT - 3;
  for (let i = 0; i < legacy; i++) {
    await apiKeysOf(t.ctx.documents).insert({
      _id: `key_legacy${i}`, workspaceId, projectId, name: `legacy ${i}`, environment: 'development', secretHash: `legacy-hash-${i}`,
      preview: 'rr_test_lega', permissions: ['email:send'], createdAt: new Date(Date.UTC(2024, 0, 1, 0, 0, i)).toISOString(), revokedAt: null,
    });
  }
  const answers = await createAll(6, 6, (i) => createKey(t, dev, projectId, `new${i}`));
  assertRefusedPast(answers, 3, /at most 100 live API keys/);
  // Revoking one made before slots makes room for one.
  assert.is((await call(t, 'DELETE', '/v1/api-keys/key_legacy4', { as: dev })).statusCode, 200);
  assert.equal((await createAll(2, 2, (i) => createKey(t, dev, projectId, `after${i}`))).map((a) => a.statusCode).sort(), [201, 409]);

  // A key revoked by a write that died before freeing its slot: its slot is taken back once the
  // claim is a minute old (not before: its creation may still be under way).
  const [held] = await apiKeysOf(t.ctx.documents).find({ where: { projectId, name: 'new0' } });
  const heldSlot = held.slot;
  assert.ok(heldSlot, 'a key made now holds a slot');
  await apiKeysOf(t.ctx.documents).replace({ ...held, revokedAt: new Date().toISOString() }, held._v);
  const project = (await projectsOf(t.ctx.documents).get(projectId))!;
  const input = { project, name: 'late', permissions: ['email:send' as const] };
  const refused = await createApiKey(t.ctx.documents, input, new Date(Date.now() + 30_000)).then(() => null, (error: { code?: string }) => error.code);
  assert.is(refused, 'conflict', 'half a minute after its claim the slot is still held');
  const { key } = await createApiKey(t.ctx.documents, input, new Date(Date.now() + 61_000));
  assert.is((await apiKeysOf(t.ctx.documents).get(key._id))?.slot, heldSlot);
});

test(`a workspace has at most ${MAX_PROJECTS_PER_WORKSPACE} projects, also when creations race`, async ({ t }) => {
  const dev = await newCaller(t, 'dev@projects.test');
  const { workspaceId } = await workspaceWithProject(t, dev);
  const answers = await createAll(MAX_PROJECTS_PER_WORKSPACE + 10, 40, (i) =>
    call(t, 'POST', `/v1/workspaces/${workspaceId}/projects`, { as: dev, body: { name: `p${i}`, environment: 'development' } }));
  assertRefusedPast(answers, MAX_PROJECTS_PER_WORKSPACE - 1, /^a workspace has at most 100 projects$/);
  const listed = await call(t, 'GET', `/v1/workspaces/${workspaceId}/projects`, { as: dev });
  assert.is(listed.json().projects.length, MAX_PROJECTS_PER_WORKSPACE);
  assert.is(await projectsOf(t.ctx.documents).count({ workspaceId }), MAX_PROJECTS_PER_WORKSPACE);
});

test(`a user creates at most ${MAX_WORKSPACES_PER_CREATOR} workspaces, also at once; joining others' is not creating`, async ({ t }) => {
  const user = await newCaller(t, 'anyone@workspaces.test');
  const answers = await createAll(MAX_WORKSPACES_PER_CREATOR + 5, 15, (i) => call(t, 'POST', '/v1/workspaces', { as: user, body: { name: `w${i}` } }));
  assertRefusedPast(answers, MAX_WORKSPACES_PER_CREATOR, /^a user may create at most 10 workspaces$/);
  const created = answers.filter((a) => a.statusCode === 201).map((a) => a.json().id as string);

  const other = await newCaller(t, 'other@workspaces.test');
  const { workspaceId: joined } = await workspaceWithProject(t, other);
  await addMember(t, other, joined, user, 'developer');
  const listed = (await call(t, 'GET', '/v1/workspaces', { as: user })).json().workspaces as Array<{ id: string; role: string }>;
  assert.equal(listed.map((w) => w.id).sort(), [...created, joined].sort());
  assert.is(listed.find((w) => w.id === joined)?.role, 'developer');
  const session = (await call(t, 'GET', '/v1/session', { as: user })).json();
  assert.equal(session.memberships.map((m: { workspaceId: string }) => m.workspaceId).sort(), [...created, joined].sort());
  assert.is((await call(t, 'POST', '/v1/workspaces', { as: other, body: { name: 'second' } })).statusCode, 201, 'the limit is each creator\'s');
});

test(`a project has at most ${MAX_TEMPLATES_PER_PROJECT} templates; deleting one makes room`, async ({ t }) => {
  const dev = await newCaller(t, 'dev@templates.test');
  const { projectId } = await workspaceWithProject(t, dev);
  const create = (slug: string) =>
    call(t, 'POST', `/v1/templates?projectId=${projectId}`, { as: dev, body: { name: slug, slug, subject: 'Hi', text: 'hello' } });
  // At most 8 saves of one workspace may wait for a template thread: batches of 8.
  const answers = await createAll(MAX_TEMPLATES_PER_PROJECT + 8, 8, (i) => create(`t-${i}`));
  assertRefusedPast(answers, MAX_TEMPLATES_PER_PROJECT, /^a project has at most 1000 templates; delete one to make room$/);
  // An edited template keeps its slot, which deleting it then frees.
  const edited = answers.find((a) => a.statusCode === 201)!.json();
  const patch = { name: edited.name, slug: edited.slug, subject: 'Hello', text: 'hello again', revision: edited.revision };
  assert.is((await call(t, 'PATCH', `/v1/templates/${edited.id}?projectId=${projectId}`, { as: dev, body: patch })).statusCode, 200);
  assert.is((await create('after-edit')).statusCode, 409);
  const doomed = edited.id as string;
  assert.is((await call(t, 'DELETE', `/v1/templates/${doomed}?projectId=${projectId}`, { as: dev })).statusCode, 200);
  const again = await create('after-delete');
  assert.is(again.statusCode, 201, again.body);
  assert.is((await create('past-the-limit')).statusCode, 409);
});

test.run();
