// A role change is checked against the membership it replaces: when an owner promotes a member
// to owner between an admin's read of that member and the admin's write (demoting them), the
// admin's retried write sees an owner and is refused (403), and the member stays owner.
// MANAGEMENT-API.md, Members: "admins change those who are not owners, to any role but owner".
// The interleaving is fixed by holding the two membership writes until both requests have read
// the member, then letting the owner's go first (no sleeps).
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deferred } from './support/eventually.ts';
import { addMember, call, newCaller, workspaceWithProject, type Caller } from './support/management.ts';

interface Ctx { t: TestApp; owner: Caller; admin: Caller; member: Caller }
const test = suite<Ctx>('an admin\'s role change racing an owner\'s promotion');
test.before(async (ctx) => {
  ctx.t = await startTestApp();
  ctx.owner = await newCaller(ctx.t, 'owner@roles.test');
  ctx.admin = await newCaller(ctx.t, 'admin@roles.test');
  ctx.member = await newCaller(ctx.t, 'member@roles.test');
});
test.after(async (ctx) => { await ctx.t.close(); });

test('an admin\'s demotion that lands after the member became owner is refused (403), and the member stays owner', async ({ t, owner, admin, member }) => {
  const { workspaceId } = await workspaceWithProject(t, owner);
  await addMember(t, owner, workspaceId, admin, 'admin');
  await addMember(t, owner, workspaceId, member, 'developer');

  // Hold both writes of the member's membership until both are waiting; then the owner's first.
  const documents = t.ctx.documents;
  const original = documents.collection.bind(documents);
  const memberDoc = `${workspaceId}:${member.userId}`;
  const held: Array<{ role: string; go: ReturnType<typeof deferred<void>> }> = [];
  const bothHeld = deferred<void>();
  (documents as { collection: typeof documents.collection }).collection = ((name: string) => {
    const collection = original(name);
    if (name !== COLLECTIONS.memberships) return collection;
    return new Proxy(collection, {
      get(target, property) {
        if (property !== 'replace') {
          const value = Reflect.get(target, property, target);
          return typeof value === 'function' ? value.bind(target) : value;
        }
        return async (doc: { _id: string; role: string }, version: number) => {
          if (doc._id === memberDoc && held.length < 2) {
            const go = deferred<void>();
            held.push({ role: doc.role, go });
            if (held.length === 2) bothHeld.resolve();
            await go.promise;
          }
          return target.replace(doc as never, version);
        };
      },
    });
  }) as typeof documents.collection;

  const promote = call(t, 'PATCH', `/v1/workspaces/${workspaceId}/members/${member.userId}`, { as: owner, body: { role: 'owner' } });
  const demote = call(t, 'PATCH', `/v1/workspaces/${workspaceId}/members/${member.userId}`, { as: admin, body: { role: 'viewer' } });
  await bothHeld.promise;
  held.find((h) => h.role === 'owner')!.go.resolve();
  const promoted = await promote;
  held.find((h) => h.role === 'viewer')!.go.resolve();
  const demoted = await demote;
  (documents as { collection: unknown }).collection = original;

  assert.is(promoted.statusCode, 200, promoted.body);
  const members = (await call(t, 'GET', `/v1/workspaces/${workspaceId}`, { as: owner })).json().members as Array<{ userId: string; role: string }>;
  assert.equal(
    { demote: demoted.statusCode, role: members.find((m) => m.userId === member.userId)?.role },
    { demote: 403, role: 'owner' },
    `the admin's PATCH: ${demoted.statusCode} ${demoted.body}`,
  );
});

test.run();
