// An addition and a removal of one address that overlap, whichever comes first in the history,
// must leave the workspace's suppression history (`suppressions-<workspaceId>`) with the list's
// word on the address: the list is what admission reads, the history what replays and exports
// read, and apps/services/management/suppressions.ts promises the list never blocks less than
// the history says. Each addition writes the entry, then its RecipientSuppressed; each removal
// appends its RecipientUnsuppressed, then deletes the entry; the tests hold one write to open
// the window between two others. Real SMTP to the inbound server for the bounces, real HTTP for
// the owner's additions and removals.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { InboundServer } from '../apps/inbound/inbound-server.ts';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { applyAutomaticSuppression } from '../apps/services/feedback/auto-suppression.ts';
import { verpAddress, VERP_MAC_PURPOSE } from '../domain/delivery/verp.ts';
import { emailStreamId } from '../domain/email/events.ts';
import { upcastEmailEvent } from '../domain/email/upcast.ts';
import { originOfEvent } from '../domain/events/metadata.ts';
import type { SuppressionEntry } from '../domain/management.ts';
import { suppressionStreamId } from '../domain/suppressions/events.ts';
import type { Collection, DocumentStore } from '../infra/ports/document-store.ts';
import type { EventStore, NewEvent } from '../infra/ports/event-store.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { startTestInbound } from './support/inbound.ts';
import { deliveryTenant, send, type DeliveryTenant } from './support/delivery.ts';
import { deferred, waitUntil } from './support/eventually.ts';
import { processorsCaughtUp } from './support/markers.ts';
import { call, workspaceOwner, type Caller } from './support/management.ts';
import { deliverReport, dsn } from './support/reports.ts';

interface Ctx { t: TestApp; inbound: InboundServer; tenant: DeliveryTenant; owner: Caller }
const test = suite<Ctx>('an addition and a removal of one address that overlap');

test.before(async (ctx) => {
  ctx.t = await startTestApp({}, { processors: ['suppressor'] });
  ctx.tenant = await deliveryTenant(ctx.t);
  ctx.owner = await workspaceOwner(ctx.t, ctx.tenant.workspaceId, 'owner@race.test');
  ctx.inbound = await startTestInbound(ctx.t);
});
/** Holds still in place: released after each test, so that a failed one does not leave a request or the suppressor waiting. */
const holds: Array<{ release(): void }> = [];
test.after.each(() => {
  for (const hold of holds.splice(0)) hold.release();
});
test.after(async (ctx) => {
  await ctx.inbound.stop();
  await ctx.t.close();
});

/** Holds the first append to the workspace's suppression stream that `which` picks, until released. */
function holdAppend(events: EventStore, workspaceId: string, which: (event: NewEvent) => boolean) {
  const append = events.append;
  const released = deferred();
  let reached = false;
  events.append = async (streamId, list, options) => {
    if (!reached && streamId === suppressionStreamId(workspaceId) && list[0] && which(list[0])) {
      reached = true;
      await released.promise;
    }
    return append.call(events, streamId, list, options);
  };
  const hold = {
    reached: () => reached,
    release: () => {
      events.append = append;
      released.resolve();
    },
  };
  holds.push(hold);
  return hold;
}

/** Holds the next delete of the suppression entry `id`, until released. */
function holdDelete(documents: DocumentStore, id: string) {
  const collection = documents.collection;
  const released = deferred();
  let reached = false;
  documents.collection = function <T extends { _id: string }>(name: string): Collection<T> {
    const real = collection.call(documents, name) as Collection<T>;
    if (name !== COLLECTIONS.suppressions) return real;
    return new Proxy(real, {
      get: (target, property) => {
        if (property !== 'delete') {
          const value = Reflect.get(target, property, target);
          return typeof value === 'function' ? value.bind(target) : value;
        }
        return async (docId: string, expectedVersion?: number) => {
          if (!reached && docId === id) {
            reached = true;
            await released.promise;
          }
          return target.delete(docId, expectedVersion);
        };
      },
    });
  };
  const hold = {
    reached: () => reached,
    release: () => {
      documents.collection = collection;
      released.resolve();
    },
  };
  holds.push(hold);
  return hold;
}

const base = (tenant: DeliveryTenant) => `/v1/workspaces/${tenant.workspaceId}/suppressions`;
const isAutomatic = (event: NewEvent) => event.type === 'RecipientSuppressed' && (event.data as { by?: { kind?: string } }).by?.kind === 'email_event';

/** Sends to `address` and delivers a DSN saying it failed 5.1.1 to the email's return path; the email's id. */
async function hardBounce(t: TestApp, tenant: DeliveryTenant, inbound: InboundServer, address: string): Promise<string> {
  const id = await send(t, tenant.key, { from: `hello@${tenant.domain}`, to: address, subject: 'Hi', text: 'hi' });
  const returnPath = verpAddress({ emailId: id, recipientIndex: 0, mailFromDomain: `bounce.${tenant.domain}` }, (d) => t.ctx.services.secrets.mac(VERP_MAC_PURPOSE, d));
  await deliverReport(inbound.port, returnPath, dsn({ recipient: address, action: 'failed', status: '5.1.1', diagnostic: '550 5.1.1 user unknown' }));
  return id;
}

const listed = async (t: TestApp, tenant: DeliveryTenant, owner: Caller): Promise<string[]> =>
  (await call(t, 'GET', base(tenant), { as: owner })).json().suppressions.map((s: { address: string }) => s.address);

/** The history's changes of `address`, in order. */
const historyOf = async (t: TestApp, tenant: DeliveryTenant, address: string): Promise<string[]> =>
  (await t.stores.events.readStream(suppressionStreamId(tenant.workspaceId))).filter((e) => e.data.address === address).map((e) => e.type);

async function assertAgree(t: TestApp, tenant: DeliveryTenant, owner: Caller, address: string): Promise<void> {
  const list = await listed(t, tenant, owner);
  const history = await historyOf(t, tenant, address);
  assert.is(history.at(-1) === 'RecipientSuppressed', list.includes(address),
    `list ${JSON.stringify(list)}, history of ${address} ${JSON.stringify(history)}: the history's last word and the list disagree`);
}

test('a removal made while a hard bounce\'s block is being recorded: history and list agree', async ({ t, inbound, tenant, owner }) => {
  const address = 'ann@example.org';
  const blocking = holdAppend(t.stores.events, tenant.workspaceId, isAutomatic);
  await hardBounce(t, tenant, inbound, address);
  await waitUntil(async () => blocking.reached() && (await listed(t, tenant, owner)).includes(address), 'the entry is listed, its event held', 10_000);

  const removed = await call(t, 'DELETE', `${base(tenant)}/${encodeURIComponent(address)}`, { as: owner });
  assert.is(removed.statusCode, 200, removed.body);
  blocking.release();
  await processorsCaughtUp(t, ['suppressor']);

  await assertAgree(t, tenant, owner, address);
  assert.not.ok((await listed(t, tenant, owner)).includes(address), 'the owner\'s removal stands');
});

test('a removal whose event comes before a hard bounce\'s and whose delete comes after it: history and list agree', async ({ t, inbound, tenant, owner }) => {
  const address = 'bea@example.org';
  const blocking = holdAppend(t.stores.events, tenant.workspaceId, isAutomatic);
  await hardBounce(t, tenant, inbound, address);
  await waitUntil(async () => blocking.reached() && (await listed(t, tenant, owner)).includes(address), 'the entry is listed, its event held', 10_000);

  // The removal reads the entry and appends its event; its delete waits.
  const deleting = holdDelete(t.stores.documents, `${tenant.workspaceId}:${address}`);
  const removal = call(t, 'DELETE', `${base(tenant)}/${encodeURIComponent(address)}`, { as: owner });
  await waitUntil(() => deleting.reached(), 'the removal is about to delete the entry', 10_000);
  assert.equal(await historyOf(t, tenant, address), ['RecipientUnsuppressed'], 'the removal\'s event is in');
  // The bounce's event goes in after it, and the suppressor is done with the bounce.
  blocking.release();
  await processorsCaughtUp(t, ['suppressor']);
  assert.equal((await historyOf(t, tenant, address)).slice(0, 2), ['RecipientUnsuppressed', 'RecipientSuppressed']);
  deleting.release();
  const removed = await removal;
  assert.is(removed.statusCode, 200, removed.body);

  await assertAgree(t, tenant, owner, address);
  assert.not.ok((await listed(t, tenant, owner)).includes(address), 'the owner\'s removal stands');
});

test('a removal made while an owner\'s addition is being recorded: history and list agree', async ({ t, tenant, owner }) => {
  const address = 'cid@example.org';
  const adding = holdAppend(t.stores.events, tenant.workspaceId, (e) => e.type === 'RecipientSuppressed');
  const addition = call(t, 'POST', base(tenant), { as: owner, body: { address } });
  await waitUntil(async () => adding.reached() && (await listed(t, tenant, owner)).includes(address), 'the entry is listed, its event held', 10_000);

  const removed = await call(t, 'DELETE', `${base(tenant)}/${encodeURIComponent(address)}`, { as: owner });
  assert.is(removed.statusCode, 200, removed.body);
  adding.release();
  const added = await addition;
  assert.is(added.statusCode, 201, added.body);

  await assertAgree(t, tenant, owner, address);
});

test('the suppressor handling a bounce again writes nothing more', async ({ t, inbound, tenant, owner }) => {
  const address = 'dan@example.org';
  const id = await hardBounce(t, tenant, inbound, address);
  await processorsCaughtUp(t, ['suppressor']);
  const entry = () => t.stores.documents.collection<SuppressionEntry>(COLLECTIONS.suppressions).get(`${tenant.workspaceId}:${address}`);
  const before = await entry();
  assert.is(before?.reason, 'hard_bounce');
  assert.equal(await historyOf(t, tenant, address), ['RecipientSuppressed']);

  // At-least-once: the same RecipientReported handled once more.
  const reported = (await t.stores.events.readStream(emailStreamId(id))).find((e) => e.type === 'RecipientReported')!;
  assert.is(reported.id, before?.lastEventId);
  const added = await applyAutomaticSuppression({ events: t.stores.events, documents: t.stores.documents, secrets: t.ctx.services.secrets, now: () => new Date() }, upcastEmailEvent(reported), originOfEvent(reported));

  assert.is(added, 0);
  assert.equal(await historyOf(t, tenant, address), ['RecipientSuppressed'], 'no second event');
  assert.is((await entry())?.createdAt, before?.createdAt);
  await assertAgree(t, tenant, owner, address);
});

test.run();
