// A workspace keeps an owner whatever the interleaving (MANAGEMENT-API.md, Members): two owners
// who demote each other at the same moment, or both leave at once, cannot both succeed. One
// request is answered 200, the other 409, and one owner stays, who may still make owners (an
// ownerless workspace could never get one again: only owners make owners). The rule holds on
// what is written, not on a copy read before the other's write: each owner change commits by a
// compare-and-set of the workspace document, and the one that loses counts the owners again and
// undoes its write (requireAnotherOwner, commitOwnerChange in apps/services/management/workspaces.ts).
// Run on the embedded store and, when RELAY_MONGODB_URL is set, on MongoDB or FerretDB.
// The interleaving is fixed, without sleeps, by holding both membership writes until both
// requests have made their check, then letting them go (the same device as
// test/member-role-change-race.int.test.ts).
import * as assert from 'uvu/assert';
import { COLLECTIONS } from '../apps/services/collections.ts';
import type { TestApp } from './support/app.ts';
import { deferred } from './support/eventually.ts';
import { addMember, call, errorCode, newCaller, workspaceWithProject, type Caller } from './support/management.ts';
import { skippableSuite } from './support/skippable-suite.ts';
import { distributedSkipReason, startAppIn, type Mode } from './support/templates.ts';

interface Ctx { t: TestApp; n: number }

/**
 * Until two writes of the workspace's memberships (replace or delete, `methods`) are waiting,
 * holds each; then lets both go. Returns a promise of both being held, and the undo.
 */
function holdTwoMembershipWrites(t: TestApp, workspaceId: string, methods: Array<'replace' | 'delete'>) {
  const documents = t.ctx.documents;
  const original = documents.collection.bind(documents);
  const go = deferred<void>();
  const bothHeld = deferred<void>();
  let held = 0;
  (documents as { collection: typeof documents.collection }).collection = ((name: string) => {
    const collection = original(name);
    if (name !== COLLECTIONS.memberships) return collection;
    return new Proxy(collection, {
      get(target, property) {
        const value = Reflect.get(target, property, target);
        if (typeof property !== 'string' || !(methods as string[]).includes(property)) return typeof value === 'function' ? value.bind(target) : value;
        return async (...args: unknown[]) => {
          const first = args[0] as { _id?: string } | string;
          const id = typeof first === 'string' ? first : first?._id;
          if (typeof id === 'string' && id.startsWith(`${workspaceId}:`) && held < 2) {
            held++;
            if (held === 2) bothHeld.resolve();
            await go.promise;
          }
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
  }) as typeof documents.collection;
  return {
    bothHeld: bothHeld.promise,
    release: () => go.resolve(),
    undo: () => { (documents as { collection: unknown }).collection = original; },
  };
}

async function twoOwners(ctx: Ctx): Promise<{ a: Caller; b: Caller; admin: Caller; workspaceId: string }> {
  const n = ++ctx.n;
  const a = await newCaller(ctx.t, `ann${n}@owners.test`);
  const b = await newCaller(ctx.t, `bob${n}@owners.test`);
  const admin = await newCaller(ctx.t, `ada${n}@owners.test`);
  const { workspaceId } = await workspaceWithProject(ctx.t, a);
  await addMember(ctx.t, a, workspaceId, b, 'owner');
  await addMember(ctx.t, a, workspaceId, admin, 'admin');
  return { a, b, admin, workspaceId };
}

const owners = async (t: TestApp, workspaceId: string, as: Caller) => {
  const detail = await call(t, 'GET', `/v1/workspaces/${workspaceId}`, { as });
  return (detail.json().members as Array<{ email: string; role: string }>).filter((m) => m.role === 'owner').map((m) => m.email);
};

function ownersSuite(mode: Mode, skipReason?: string): void {
  const test = skippableSuite<Ctx>(`two owners demoting (or removing) each other at once (${mode})`, skipReason);
  test.before(async (ctx) => {
    ctx.t = await startAppIn(mode);
    ctx.n = 0;
  });
  test.after(async (ctx) => { await ctx.t?.close(); });

  test('each owner demoting the other to admin at once: one is refused 409 and one owner stays', async (ctx) => {
    const { t } = ctx;
    const { a, b, admin, workspaceId } = await twoOwners(ctx);
    const hold = holdTwoMembershipWrites(t, workspaceId, ['replace']);
    let answers;
    try {
      const aDemotesB = call(t, 'PATCH', `/v1/workspaces/${workspaceId}/members/${b.userId}`, { as: a, body: { role: 'admin' } });
      const bDemotesA = call(t, 'PATCH', `/v1/workspaces/${workspaceId}/members/${a.userId}`, { as: b, body: { role: 'admin' } });
      await hold.bothHeld; // both requests have passed the "another owner remains" check
      hold.release();
      answers = await Promise.all([aDemotesB, bDemotesA]);
    } finally {
      hold.undo();
    }
    const left = await owners(t, workspaceId, admin);
    // The owner who stays may still make owners (an ownerless workspace never could again).
    const stays = [a, b].find((caller) => left.includes(caller.email));
    const invite = stays ? await call(t, 'POST', `/v1/workspaces/${workspaceId}/members`, { as: stays, body: { email: 'new-owner@owners.test', role: 'owner' } }) : null;
    assert.equal(
      { answers: answers.map((r) => r.statusCode).sort(), refusal: answers.filter((r) => r.statusCode !== 200).map(errorCode), owners: left.length, invite: invite?.statusCode ?? null },
      { answers: [200, 409], refusal: ['conflict'], owners: 1, invite: 201 },
      `answers: ${answers.map((r) => `${r.statusCode} ${r.body}`).join(' | ')}; owners left: ${JSON.stringify(left)}`,
    );
  });

  test('both owners leaving the workspace at once: one is refused 409 and one owner stays', async (ctx) => {
    const { t } = ctx;
    const { a, b, admin, workspaceId } = await twoOwners(ctx);
    const hold = holdTwoMembershipWrites(t, workspaceId, ['delete']);
    let answers;
    try {
      const aLeaves = call(t, 'DELETE', `/v1/workspaces/${workspaceId}/members/${a.userId}`, { as: a });
      const bLeaves = call(t, 'DELETE', `/v1/workspaces/${workspaceId}/members/${b.userId}`, { as: b });
      await hold.bothHeld;
      hold.release();
      answers = await Promise.all([aLeaves, bLeaves]);
    } finally {
      hold.undo();
    }
    const left = await owners(t, workspaceId, admin);
    assert.equal(
      { answers: answers.map((r) => r.statusCode).sort(), owners: left.length },
      { answers: [200, 409], owners: 1 },
      `answers: ${answers.map((r) => `${r.statusCode} ${r.body}`).join(' | ')}; owners left: ${JSON.stringify(left)} (the admin ${admin.email} remains, and may not make an owner)`,
    );
  });

  test.run();
}

ownersSuite('embedded');
ownersSuite('distributed', distributedSkipReason());
