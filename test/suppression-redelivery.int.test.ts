// A bounce the suppressor handled, delivered to it again (at-least-once: a crash before its
// offset commit, `relay parked retry`) after an owner removed the address from the list, must
// leave the address removed: the owner decided after that bounce. A new bounce still blocks it.
// Real SMTP to the inbound server for the bounces, real HTTP for the owner's changes, and the
// redelivery published to the events topic for the suppressor's group as `relay parked retry`
// publishes it. The records that make this so go with retention after their period.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { InboundServer } from '../apps/inbound/inbound-server.ts';
import { startRetention } from '../apps/pipeline/retention.ts';
import { RETRY_GROUP_HEADER } from '../apps/processors/processor.ts';
import { eventsTopic, groupOf } from '../apps/pipeline/topics.ts';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { suppressionSourcesOf } from '../apps/services/management/suppression-sources.ts';
import { DELIVERY_POLICY } from '../domain/email/delivery.ts';
import { OPERATIONAL_RETENTION } from '../domain/retention.ts';
import { verpAddress, VERP_MAC_PURPOSE } from '../domain/delivery/verp.ts';
import { emailStreamId } from '../domain/email/events.ts';
import type { SuppressionEntry } from '../domain/management.ts';
import { suppressionStreamId } from '../domain/suppressions/events.ts';
import { eventRecord } from '../infra/events-topic.ts';
import type { Collection, DocumentStore } from '../infra/ports/document-store.ts';
import type { StoredEvent } from '../infra/ports/event-store.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { startTestInbound } from './support/inbound.ts';
import { deliveryTenant, send, type DeliveryTenant } from './support/delivery.ts';
import { deferred, waitUntil } from './support/eventually.ts';
import { processorsCaughtUp } from './support/markers.ts';
import { call, workspaceOwner, type Caller } from './support/management.ts';
import { deliverReport, dsn } from './support/reports.ts';

interface Ctx { t: TestApp; inbound: InboundServer; tenant: DeliveryTenant; owner: Caller }
const test = suite<Ctx>('a bounce handled again after its address was removed from the list');

test.before(async (ctx) => {
  ctx.t = await startTestApp({}, { processors: ['suppressor'] });
  ctx.tenant = await deliveryTenant(ctx.t);
  ctx.owner = await workspaceOwner(ctx.t, ctx.tenant.workspaceId, 'owner@redelivery.test');
  ctx.inbound = await startTestInbound(ctx.t);
});
/** Holds still in place: released after each test, so that a failed one does not leave the suppressor waiting. */
const holds: Array<{ release(): void }> = [];
test.after.each(() => {
  for (const hold of holds.splice(0)) hold.release();
});
test.after(async (ctx) => {
  await ctx.inbound.stop();
  await ctx.t.close();
});

const base = (tenant: DeliveryTenant) => `/v1/workspaces/${tenant.workspaceId}/suppressions`;

const sendTo = ({ t, tenant }: Ctx, address: string): Promise<string> => send(t, tenant.key, { from: `hello@${tenant.domain}`, to: address, subject: 'Hi', text: 'hi' });

/** Delivers a DSN saying email `id` failed 5.1.1 for `address` to its return path; the email's RecipientReported. */
async function hardBounce({ t, tenant, inbound }: Ctx, address: string, id: string): Promise<StoredEvent> {
  const returnPath = verpAddress({ emailId: id, recipientIndex: 0, mailFromDomain: `bounce.${tenant.domain}` }, (d) => t.ctx.services.secrets.mac(VERP_MAC_PURPOSE, d));
  await deliverReport(inbound.port, returnPath, dsn({ recipient: address, action: 'failed', status: '5.1.1', diagnostic: '550 5.1.1 user unknown' }));
  const reported = (await t.stores.events.readStream(emailStreamId(id))).find((e) => e.type === 'RecipientReported');
  assert.ok(reported, `email ${id} has its RecipientReported`);
  return reported;
}

/** Hands `event` to the suppressor's group once more, as `relay parked retry` does, and waits until the group has committed it. */
async function redeliver(t: TestApp, event: StoredEvent): Promise<void> {
  const record = eventRecord(event);
  await t.stores.log.publish(eventsTopic(t.config.logNamespace), [{ ...record, headers: { ...record.headers, [RETRY_GROUP_HEADER]: groupOf(t.config.logNamespace, 'suppressor') } }]);
  await processorsCaughtUp(t, ['suppressor']);
}

const entryOf = (t: TestApp, tenant: DeliveryTenant, address: string) =>
  t.stores.documents.collection<SuppressionEntry>(COLLECTIONS.suppressions).get(`${tenant.workspaceId}:${address}`);

const listed = async ({ t, tenant, owner }: Ctx): Promise<string[]> =>
  (await call(t, 'GET', base(tenant), { as: owner })).json().suppressions.map((s: { address: string }) => s.address);

/** The history's changes of `address`, in order. */
const historyOf = async ({ t, tenant }: Ctx, address: string): Promise<string[]> =>
  (await t.stores.events.readStream(suppressionStreamId(tenant.workspaceId))).filter((e) => e.data.address === address).map((e) => e.type);

async function remove(ctx: Ctx, address: string): Promise<void> {
  const removed = await call(ctx.t, 'DELETE', `${base(ctx.tenant)}/${encodeURIComponent(address)}`, { as: ctx.owner });
  assert.is(removed.statusCode, 200, removed.body);
}

test('the bounce that blocked the address, handled again after the removal, leaves it removed; a new bounce blocks it', async (ctx) => {
  const address = 'ann@example.org';
  const first = await hardBounce(ctx, address, await sendTo(ctx, address));
  await processorsCaughtUp(ctx.t, ['suppressor']);
  assert.ok((await listed(ctx)).includes(address), 'the bounce blocks the address');
  assert.is((await entryOf(ctx.t, ctx.tenant, address))?.lastEventId, first.id, 'the entry is this bounce\'s');
  await remove(ctx, address);
  assert.equal(await historyOf(ctx, address), ['RecipientSuppressed', 'RecipientUnsuppressed']);

  await redeliver(ctx.t, first);
  assert.not.ok((await listed(ctx)).includes(address), 'the owner\'s removal stands');
  assert.equal(await historyOf(ctx, address), ['RecipientSuppressed', 'RecipientUnsuppressed'], 'nothing recorded for the bounce again');

  const second = await hardBounce(ctx, address, await sendTo(ctx, address));
  await processorsCaughtUp(ctx.t, ['suppressor']);
  assert.ok((await listed(ctx)).includes(address), 'the new bounce blocks the address again');
  const entry = await entryOf(ctx.t, ctx.tenant, address);
  assert.is(entry?.reason, 'hard_bounce');
  assert.is(entry?.lastEventId, second.id);
  assert.equal(await historyOf(ctx, address), ['RecipientSuppressed', 'RecipientUnsuppressed', 'RecipientSuppressed']);
});

test('a bounce handled while the address was blocked already, handled again after the removal, leaves it removed', async (ctx) => {
  const address = 'bea@example.org';
  // Sent before the owner blocks the address, bounced after.
  const id = await sendTo(ctx, address);
  const added = await call(ctx.t, 'POST', base(ctx.tenant), { as: ctx.owner, body: { address } });
  assert.is(added.statusCode, 201, added.body);
  const bounce = await hardBounce(ctx, address, id);
  // The bounce found the owner's entry: the suppressor is done with it, and the entry is unchanged.
  await processorsCaughtUp(ctx.t, ['suppressor']);
  assert.is((await entryOf(ctx.t, ctx.tenant, address))?.reason, 'manual');
  await remove(ctx, address);

  await redeliver(ctx.t, bounce);
  assert.not.ok((await listed(ctx)).includes(address), 'the owner\'s removal stands');
  assert.equal(await historyOf(ctx, address), ['RecipientSuppressed', 'RecipientUnsuppressed']);
});

/**
 * Holds the next write of a handled-source record until released, then fails it: a suppressor
 * that stopped after recording a block but before its record, whose event the log hands over again.
 */
function failSourceRecord(documents: DocumentStore) {
  const collection = documents.collection;
  const released = deferred();
  let reached = false;
  documents.collection = function <T extends { _id: string }>(name: string): Collection<T> {
    const real = collection.call(documents, name) as Collection<T>;
    if (name !== COLLECTIONS.suppressionSources) return real;
    return new Proxy(real, {
      get: (target, property) => {
        const value = Reflect.get(target, property, target);
        if (property !== 'insert' || reached) return typeof value === 'function' ? value.bind(target) : value;
        return async () => {
          reached = true;
          await released.promise;
          throw new Error('stopped before recording the bounce as handled');
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

test('a removal made after a bounce\'s block was recorded but before the suppressor was done: the bounce handled again leaves it removed', async (ctx) => {
  const address = 'cid@example.org';
  const failing = failSourceRecord(ctx.t.stores.documents);
  const bounce = await hardBounce(ctx, address, await sendTo(ctx, address));
  await waitUntil(async () => failing.reached() && (await historyOf(ctx, address)).length === 1, 'the block is recorded, the suppressor not done', 10_000);
  assert.is((await entryOf(ctx.t, ctx.tenant, address))?.lastEventId, bounce.id);
  await remove(ctx, address);

  failing.release();
  await processorsCaughtUp(ctx.t, ['suppressor']);
  assert.not.ok((await listed(ctx)).includes(address), 'the owner\'s removal stands');
  assert.equal(await historyOf(ctx, address), ['RecipientSuppressed', 'RecipientUnsuppressed']);
});

test('the suppressor\'s records of handled bounces go with retention, 30 days after', async (ctx) => {
  const address = 'dot@example.org';
  const bounce = await hardBounce(ctx, address, await sendTo(ctx, address));
  await processorsCaughtUp(ctx.t, ['suppressor']);
  const sources = suppressionSourcesOf(ctx.t.stores.documents);
  const [record] = await sources.find({ where: { eventId: bounce.id } });
  assert.ok(record, 'the bounce is recorded as handled');
  const sweepAt = async (now: Date) => {
    let removed: number | undefined;
    const retention = await startRetention({
      documents: ctx.t.stores.documents, events: ctx.t.stores.events, deliveryPolicy: DELIVERY_POLICY, now: () => now, everyMs: 3_600_000,
      onPruned: (report) => (removed = report.suppressionSources), onError: (error) => { throw error; },
    });
    await retention.stop();
    assert.ok(removed !== undefined, 'the pass completed');
    return removed;
  };
  const handledAt = Date.parse(record.handledAt);
  await sweepAt(new Date(handledAt + OPERATIONAL_RETENTION.handledSuppressionSourceMs));
  assert.ok(await sources.get(record._id), 'kept for the whole period');
  assert.ok(await sweepAt(new Date(handledAt + OPERATIONAL_RETENTION.handledSuppressionSourceMs + 1)) >= 1);
  assert.is(await sources.get(record._id), null, 'gone after it');
});

test.run();
