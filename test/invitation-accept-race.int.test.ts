// Accepting an invitation decides on the invitation it read. An admin who revokes or renews the
// invitation between that read and the accept's write must not be overruled by a decision made
// on the old copy: a revoked invitation makes no member (404, as any revoked invitation), and a
// renewed one is accepted as renewed (its role). The race is made deterministic by a document
// store that runs the admin's request, through the real API, right after the accept's read.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { COLLECTIONS } from '../apps/services/collections.ts';
import type { Collection, DocumentStore } from '../infra/ports/document-store.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { call, errorCode, newCaller, workspaceWithProject, type Caller } from './support/management.ts';

interface Ctx { t: TestApp; owner: Caller; workspaceId: string; store: DocumentStore; hook: { id: string; after: () => Promise<void> } | null }

const test = suite<Ctx>('an invitation changed between the accept\'s read and its write');

/** The store, but the next read of invitation `hook.id` runs `hook.after` (once) before it returns. */
function withHookAfterInvitationRead(ctx: Ctx): DocumentStore {
  const bound = <T extends object>(target: T, property: string | symbol) => {
    const value = Reflect.get(target, property);
    return typeof value === 'function' ? value.bind(target) : value;
  };
  return new Proxy(ctx.store, {
    get(store, property) {
      if (property !== 'collection') return bound(store, property);
      return (name: string) => {
        const collection = store.collection(name);
        if (name !== COLLECTIONS.invitations) return collection;
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
  ctx.owner = await newCaller(ctx.t, 'owner@accept-race.test');
  ({ workspaceId: ctx.workspaceId } = await workspaceWithProject(ctx.t, ctx.owner));
  ctx.store = ctx.t.ctx.documents;
  ctx.hook = null;
  ctx.t.ctx.documents = withHookAfterInvitationRead(ctx);
});

test.after(async (ctx) => {
  ctx.t.ctx.documents = ctx.store;
  await ctx.t.close();
});

const invite = async (ctx: Ctx, email: string, role: string): Promise<string> => {
  const invited = await call(ctx.t, 'POST', `/v1/workspaces/${ctx.workspaceId}/members`, { as: ctx.owner, body: { email, role } });
  assert.is(invited.statusCode, 201, invited.body);
  return invited.json().id as string;
};

const members = async (ctx: Ctx): Promise<Array<[string, string]>> =>
  (await call(ctx.t, 'GET', `/v1/workspaces/${ctx.workspaceId}`, { as: ctx.owner })).json().members.map((m: { email: string; role: string }) => [m.email, m.role]);

const pendingEmails = async (ctx: Ctx): Promise<string[]> =>
  (await call(ctx.t, 'GET', `/v1/workspaces/${ctx.workspaceId}`, { as: ctx.owner })).json().invitations.map((i: { email: string }) => i.email);

test('revoked after the accept read it: the accept is refused as for any revoked invitation, and nobody joins', async (ctx) => {
  const invitee = await newCaller(ctx.t, 'revoked@accept-race.test');
  const id = await invite(ctx, invitee.email, 'developer');
  let revoked = 0;
  ctx.hook = {
    id,
    after: async () => {
      const revoke = await call(ctx.t, 'DELETE', `/v1/invitations/${id}`, { as: ctx.owner });
      assert.is(revoke.statusCode, 200, revoke.body);
      revoked++;
    },
  };
  const accepted = await call(ctx.t, 'POST', `/v1/invitations/${id}/accept`, { as: invitee });
  // Positive marker: the revocation ran between the accept's read and its write.
  assert.is(revoked, 1, 'the revocation ran inside the accept');
  assert.is(accepted.statusCode, 404, accepted.body);
  assert.is(errorCode(accepted), 'not_found');
  assert.not.ok((await members(ctx)).some(([email]) => email === invitee.email), JSON.stringify(await members(ctx)));
  assert.is((await call(ctx.t, 'GET', `/v1/workspaces/${ctx.workspaceId}`, { as: invitee })).statusCode, 403, 'the invitee cannot read the workspace');
});

test('renewed with another role after the accept read it: the renewed invitation is the one accepted', async (ctx) => {
  const invitee = await newCaller(ctx.t, 'renewed@accept-race.test');
  const id = await invite(ctx, invitee.email, 'admin');
  let renewed = 0;
  ctx.hook = {
    id,
    after: async () => {
      assert.is(await invite(ctx, invitee.email, 'viewer'), id, 'the renewal keeps the invitation\'s id');
      renewed++;
    },
  };
  const accepted = await call(ctx.t, 'POST', `/v1/invitations/${id}/accept`, { as: invitee });
  assert.is(renewed, 1, 'the renewal ran inside the accept');
  assert.is(accepted.statusCode, 200, accepted.body);
  assert.is(accepted.json().role, 'viewer', 'the role of the renewed invitation');
  assert.ok((await members(ctx)).some(([email, role]) => email === invitee.email && role === 'viewer'), JSON.stringify(await members(ctx)));
  assert.not.ok((await pendingEmails(ctx)).includes(invitee.email), 'the renewed invitation was the one spent');
  // Spent: a second accept finds nothing.
  assert.is((await call(ctx.t, 'POST', `/v1/invitations/${id}/accept`, { as: invitee })).statusCode, 404);
});

test.run();
