// A write a member sent just before being removed is not done for them once the removal was
// answered. Every management write checks the caller's membership at its start
// (requireProjectAccess, apps/api/auth/session.ts); the writes that take time or hand out a
// secret check it again (requireAccessStill): a template save (create or update) after its
// compilation, right before it writes, refusing with the same 403 as the first check; an API key
// creation once the key is stored, revoking the key when the member is gone, so that its secret
// never leaves and no live key made for a non-member appears after the owner was told the member
// was removed (MANAGEMENT-API.md, Members).
// The interleaving is fixed, without sleeps, by a document store that runs the owner's removal,
// through the real API, right after the write's own membership check has read the membership
// (the device of test/invitation-accept-race.int.test.ts).
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { COLLECTIONS } from '../apps/services/collections.ts';
import type { Collection, DocumentStore } from '../infra/ports/document-store.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { addMember, call, errorCode, newCaller, workspaceWithProject, type Caller } from './support/management.ts';

interface Hook { id: string; after: () => Promise<void> }
interface Ctx { t: TestApp; owner: Caller; store: DocumentStore; hook: Hook | null; n: number }

const test = suite<Ctx>('a member removed while their write is in flight');

/** The store, but the next read of membership `hook.id` runs `hook.after` (once) before it returns. */
function withHookAfterMembershipRead(ctx: Ctx): DocumentStore {
  const bound = <T extends object>(target: T, property: string | symbol) => {
    const value = Reflect.get(target, property);
    return typeof value === 'function' ? value.bind(target) : value;
  };
  return new Proxy(ctx.store, {
    get(store, property) {
      if (property !== 'collection') return bound(store, property);
      return (name: string) => {
        const collection = store.collection(name);
        if (name !== COLLECTIONS.memberships) return collection;
        return new Proxy(collection, {
          get(target, key) {
            if (key !== 'get') return bound(target, key);
            return async (id: string) => {
              const read = await target.get(id);
              const hook = ctx.hook;
              if (hook && hook.id === id) {
                ctx.hook = null;
                await hook.after();
              }
              return read;
            };
          },
        }) as Collection<{ _id: string }>;
      };
    },
  });
}

test.before(async (ctx) => {
  ctx.t = await startTestApp();
  ctx.owner = await newCaller(ctx.t, 'owner@in-flight.test');
  ctx.n = 0;
  ctx.store = ctx.t.ctx.documents;
  ctx.hook = null;
  ctx.t.ctx.documents = withHookAfterMembershipRead(ctx);
});

test.after(async (ctx) => {
  ctx.t.ctx.documents = ctx.store;
  await ctx.t.close();
});

async function developerInWorkspace(ctx: Ctx) {
  const developer = await newCaller(ctx.t, `dev${++ctx.n}@in-flight.test`);
  const { workspaceId, projectId } = await workspaceWithProject(ctx.t, ctx.owner);
  await addMember(ctx.t, ctx.owner, workspaceId, developer, 'developer');
  return { developer, workspaceId, projectId };
}

/** The developer's next request is removed from the workspace by the owner right after its membership check read the membership. */
function removeDuringNextRequest(ctx: Ctx, workspaceId: string, developer: Caller) {
  const removal = { answered: 0 };
  ctx.hook = {
    id: `${workspaceId}:${developer.userId}`,
    after: async () => {
      const removed = await call(ctx.t, 'DELETE', `/v1/workspaces/${workspaceId}/members/${developer.userId}`, { as: ctx.owner });
      assert.is(removed.statusCode, 200, removed.body);
      removal.answered++;
    },
  };
  return removal;
}

const NOT_A_MEMBER = 'you are not a member of the workspace this belongs to';

test('an API key created as the owner removes its creator: 403, and the key made is revoked, its secret never handed out', async (ctx) => {
  const { developer, workspaceId, projectId } = await developerInWorkspace(ctx);
  const removal = removeDuringNextRequest(ctx, workspaceId, developer);
  const created = await call(ctx.t, 'POST', `/v1/projects/${projectId}/api-keys`, { as: developer, body: { name: 'Laptop', permissions: ['email:send', 'email:read'] } });
  // Positive marker: the removal was done and answered 200 inside the key's creation.
  assert.is(removal.answered, 1, 'the removal ran inside the key creation');
  // The next request of the removed developer is refused, as it should be.
  assert.is((await call(ctx.t, 'GET', `/v1/projects/${projectId}/api-keys`, { as: developer })).statusCode, 403);

  const keys = (await call(ctx.t, 'GET', `/v1/projects/${projectId}/api-keys`, { as: ctx.owner })).json().apiKeys as Array<{ name: string; revokedAt: string | null }>;
  const laptop = keys.filter((k) => k.name === 'Laptop');
  assert.equal(
    {
      creation: created.statusCode,
      code: created.statusCode === 201 ? null : errorCode(created),
      message: created.statusCode === 201 ? null : created.json().error.message,
      secretShown: created.body.includes('rr_test_'),
      keysMade: laptop.length,
      liveKeysMade: laptop.filter((k) => k.revokedAt === null).length,
    },
    { creation: 403, code: 'forbidden', message: NOT_A_MEMBER, secretShown: false, keysMade: 1, liveKeysMade: 0 },
    `the removed developer's key creation: ${created.statusCode} ${created.body.slice(0, 200)}`,
  );
});

test('a template created as the owner removes its author: 403 after its compilation, nothing written', async (ctx) => {
  const { developer, workspaceId, projectId } = await developerInWorkspace(ctx);
  const removal = removeDuringNextRequest(ctx, workspaceId, developer);
  const saved = await call(ctx.t, 'POST', `/v1/templates?projectId=${projectId}`, {
    as: developer, body: { name: 'Farewell', slug: 'farewell', subject: 'Bye {{name}}', text: 'So long, {{name}}' },
  });
  assert.is(removal.answered, 1, 'the removal ran inside the template save');
  const list = (await call(ctx.t, 'GET', `/v1/templates?projectId=${projectId}`, { as: ctx.owner })).json().templates as Array<{ slug: string }>;
  assert.equal(
    { save: saved.statusCode, message: saved.statusCode === 201 ? null : saved.json().error.message, written: list.some((tpl) => tpl.slug === 'farewell') },
    { save: 403, message: NOT_A_MEMBER, written: false },
    `the removed developer's save: ${saved.statusCode} ${saved.body.slice(0, 200)}`,
  );
});

test('a template update as the owner removes its author: 403 after its compilation, the template as it was', async (ctx) => {
  const { developer, workspaceId, projectId } = await developerInWorkspace(ctx);
  const made = await call(ctx.t, 'POST', `/v1/templates?projectId=${projectId}`, {
    as: developer, body: { name: 'Welcome', slug: 'welcome', subject: 'Hi {{name}}', text: 'Hello, {{name}}' },
  });
  assert.is(made.statusCode, 201, made.body);
  const id = made.json().id as string;
  const removal = removeDuringNextRequest(ctx, workspaceId, developer);
  const updated = await call(ctx.t, 'PATCH', `/v1/templates/${id}?projectId=${projectId}`, {
    as: developer, body: { name: 'Welcome', slug: 'welcome', subject: 'Goodbye {{name}}', text: 'Hello, {{name}}', revision: 1 },
  });
  assert.is(removal.answered, 1, 'the removal ran inside the template update');
  const stored = (await call(ctx.t, 'GET', `/v1/templates/${id}?projectId=${projectId}`, { as: ctx.owner })).json() as { subject: string; revision: number };
  assert.equal(
    { update: updated.statusCode, message: updated.statusCode === 200 ? null : updated.json().error.message, subject: stored.subject, revision: stored.revision },
    { update: 403, message: NOT_A_MEMBER, subject: 'Hi {{name}}', revision: 1 },
    `the removed developer's update: ${updated.statusCode} ${updated.body.slice(0, 200)}`,
  );
});

test('a member who stays keeps saving and making keys (the checks again pass)', async (ctx) => {
  const { developer, projectId } = await developerInWorkspace(ctx);
  const key = await call(ctx.t, 'POST', `/v1/projects/${projectId}/api-keys`, { as: developer, body: { name: 'Server', permissions: ['email:send'] } });
  assert.is(key.statusCode, 201, key.body);
  const reads = await call(ctx.t, 'GET', '/v1/emails', { headers: { authorization: `Bearer ${key.json().secret as string}` } });
  assert.is(reads.statusCode, 200, reads.body); // a working key: it reads the emails it sent
  const saved = await call(ctx.t, 'POST', `/v1/templates?projectId=${projectId}`, {
    as: developer, body: { name: 'Receipt', slug: 'receipt', subject: 'Your receipt', text: 'Thanks' },
  });
  assert.is(saved.statusCode, 201, saved.body);
});

test.run();
