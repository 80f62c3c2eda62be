// A BCC recipient's automatic suppression names nothing of the email it was a BCC recipient of,
// on the list as in its history, and is still handled once however often its bounce comes:
// - the list's entry, as the management API shows it (GET suppressions, the CSV export), has no
//   email id and the time the block was made, not the bounce's; the stored entry's lastEventId
//   is the block's own RecipientSuppressed, not the email event (a removal marks it handled);
// - the bounce handled again (at-least-once) records nothing more, and after an owner's removal
//   leaves the address removed;
// - a handling that stopped after appending the block's event, handled again, appends no second
//   one: the keyed id is the same on every handling.
// Real SMTP to the inbound server for the bounces, real HTTP for the list and the owner's removal,
// redeliveries published to the events topic for the suppressor's group as `relay parked retry` does.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { InboundServer } from '../apps/inbound/inbound-server.ts';
import { RETRY_GROUP_HEADER } from '../apps/processors/processor.ts';
import { eventsTopic, groupOf } from '../apps/pipeline/topics.ts';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { suppressionSourcesOf } from '../apps/services/management/suppression-sources.ts';
import { verpAddress, VERP_MAC_PURPOSE } from '../domain/delivery/verp.ts';
import { emailStreamId } from '../domain/email/events.ts';
import type { SuppressionEntry } from '../domain/management.ts';
import { suppressionStreamId } from '../domain/suppressions/events.ts';
import { eventRecord } from '../infra/events-topic.ts';
import type { Collection, DocumentStore } from '../infra/ports/document-store.ts';
import type { StoredEvent } from '../infra/ports/event-store.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, send, type DeliveryTenant } from './support/delivery.ts';
import { waitUntil } from './support/eventually.ts';
import { startTestInbound } from './support/inbound.ts';
import { processorsCaughtUp } from './support/markers.ts';
import { call, workspaceOwner, type Caller } from './support/management.ts';
import { deliverReport, dsn } from './support/reports.ts';

interface Ctx { t: TestApp; inbound: InboundServer; tenant: DeliveryTenant; owner: Caller }
const test = suite<Ctx>('a BCC recipient\'s automatic suppression on the list');

const DAY_MS = 86_400_000;

test.before(async (ctx) => {
  ctx.t = await startTestApp({}, { processors: ['suppressor'] });
  ctx.tenant = await deliveryTenant(ctx.t);
  ctx.owner = await workspaceOwner(ctx.t, ctx.tenant.workspaceId, 'owner@bcc-unlinked.test');
  // The feedback server records reports at the real time; the suppressor's clock (the app's)
  // runs a day ahead, so a block that copied its bounce's time could not pass for its own.
  ctx.inbound = await startTestInbound(ctx.t);
  ctx.t.clock.advance(DAY_MS);
});
test.after(async (ctx) => {
  await ctx.inbound.stop();
  await ctx.t.close();
});

const base = (tenant: DeliveryTenant) => `/v1/workspaces/${tenant.workspaceId}/suppressions`;

/** Sends to a visible recipient with `hidden` in BCC (recipient index 1); the email's id. */
const sendWithBcc = ({ t, tenant }: Ctx, hidden: string): Promise<string> =>
  send(t, tenant.key, { from: `hello@${tenant.domain}`, to: 'ann@example.org', bcc: hidden, subject: 'Board minutes', text: 'hi' });

/** A DSN saying `hidden` (recipient 1 of email `id`) failed 5.1.1, to its return path; the email's RecipientReported. */
async function bounceBcc({ t, tenant, inbound }: Ctx, hidden: string, id: string): Promise<StoredEvent> {
  const returnPath = verpAddress({ emailId: id, recipientIndex: 1, mailFromDomain: `bounce.${tenant.domain}` }, (d) => t.ctx.services.secrets.mac(VERP_MAC_PURPOSE, d));
  await deliverReport(inbound.port, returnPath, dsn({ recipient: hidden, action: 'failed', status: '5.1.1', diagnostic: `550 5.1.1 <${hidden}>: Recipient address rejected: User unknown` }));
  const reported = (await t.stores.events.readStream(emailStreamId(id))).find((e) => e.type === 'RecipientReported');
  assert.ok(reported, `email ${id} has its RecipientReported`);
  assert.is(reported.data.recipientIndex, 1, 'about the BCC recipient');
  return reported;
}

const listed = async ({ t, tenant, owner }: Ctx): Promise<Array<Record<string, unknown>>> => {
  const response = await call(t, 'GET', base(tenant), { as: owner });
  assert.is(response.statusCode, 200, response.body);
  return response.json().suppressions;
};

/** Waits until the address is on the list (the suppressor appends its event before it is done), then until the suppressor is done. */
async function blocked(ctx: Ctx, address: string): Promise<void> {
  await waitUntil(async () => (await listed(ctx)).some((s) => s.address === address), `${address} is listed`, 20_000);
  await processorsCaughtUp(ctx.t, ['suppressor']);
}

const entryOf = ({ t, tenant }: Ctx, address: string) =>
  t.stores.documents.collection<SuppressionEntry>(COLLECTIONS.suppressions).get(`${tenant.workspaceId}:${address}`);

/** The workspace's history of `address`, in order. */
const historyOf = async ({ t, tenant }: Ctx, address: string): Promise<StoredEvent[]> =>
  (await t.stores.events.readStream(suppressionStreamId(tenant.workspaceId))).filter((e) => e.data.address === address);

/** Hands `event` to the suppressor's group once more, as `relay parked retry` does, and waits until the group has committed it. */
async function redeliver(t: TestApp, event: StoredEvent): Promise<void> {
  const record = eventRecord(event);
  await t.stores.log.publish(eventsTopic(t.config.logNamespace), [{ ...record, headers: { ...record.headers, [RETRY_GROUP_HEADER]: groupOf(t.config.logNamespace, 'suppressor') } }]);
  await processorsCaughtUp(t, ['suppressor']);
}

test('its entry names neither the email nor its event, and its time is when the block was made', async (ctx) => {
  const { t, tenant, owner } = ctx;
  const hidden = 'quiet.watcher@two.example.org';
  const id = await sendWithBcc(ctx, hidden);
  const from = t.clock.now().toISOString();
  const reported = await bounceBcc(ctx, hidden, id);
  await blocked(ctx, hidden);
  const to = t.clock.now().toISOString();

  const response = await call(t, 'GET', base(tenant), { as: owner });
  const shown = response.json().suppressions.find((s: { address: string }) => s.address === hidden);
  assert.equal({ ...shown, createdAt: undefined }, { address: hidden, reason: 'hard_bounce', emailId: null, createdAt: undefined });
  assert.ok(shown.createdAt >= from && shown.createdAt <= to, `createdAt ${shown.createdAt} is when the suppressor made the block (${from} … ${to})`);
  assert.is.not(shown.createdAt, reported.data.occurredAt, 'not the bounce\'s time');
  assert.not.ok(response.body.includes(id), 'the list does not name the email');

  const csv = await call(t, 'GET', `${base(tenant)}/export`, { as: owner });
  assert.is(csv.statusCode, 200, csv.body);
  assert.ok(csv.body.includes(`\r\n${hidden},hard_bounce,,${shown.createdAt}\r\n`), `the export's line names no email: ${csv.body}`);
  assert.not.ok(csv.body.includes(id));

  const history = await historyOf(ctx, hidden);
  assert.equal(history.map((e) => e.type), ['RecipientSuppressed']);
  assert.equal(history[0].data.by, { kind: 'bcc_recipient_event' });
  assert.is(history[0].data.occurredAt, shown.createdAt, 'the event says when the block was made, as the list does');
  const emailEventIds = (await t.stores.events.readStream(emailStreamId(id))).map((e) => e.id);
  const entry = await entryOf(ctx, hidden);
  assert.not.ok(emailEventIds.includes(entry!.lastEventId!), 'the stored entry does not name the email\'s event');
  assert.is(entry!.lastEventId, history[0].id, 'it names the block\'s own event');
  assert.is(entry!.emailId, null);
});

test('its bounce handled again records nothing more, and after an owner\'s removal leaves the address removed', async (ctx) => {
  const hidden = 'silent.partner@two.example.org';
  const reported = await bounceBcc(ctx, hidden, await sendWithBcc(ctx, hidden));
  await blocked(ctx, hidden);
  const before = await entryOf(ctx, hidden);

  await redeliver(ctx.t, reported);
  assert.equal((await historyOf(ctx, hidden)).map((e) => e.type), ['RecipientSuppressed'], 'no second event');
  assert.equal(await entryOf(ctx, hidden), before, 'the entry is as it was');

  const removed = await call(ctx.t, 'DELETE', `${base(ctx.tenant)}/${encodeURIComponent(hidden)}`, { as: ctx.owner });
  assert.is(removed.statusCode, 200, removed.body);
  await redeliver(ctx.t, reported);
  assert.not.ok((await listed(ctx)).some((s) => s.address === hidden), 'the owner\'s removal stands');
  assert.equal((await historyOf(ctx, hidden)).map((e) => e.type), ['RecipientSuppressed', 'RecipientUnsuppressed']);
});

/** Fails the next write of a handled-source record once: a suppressor that stopped after recording a block, before its record. */
function failSourceRecordOnce(documents: DocumentStore): { failed: () => boolean; restore: () => void } {
  const collection = documents.collection;
  let failed = false;
  documents.collection = function <T extends { _id: string }>(name: string): Collection<T> {
    const real = collection.call(documents, name) as Collection<T>;
    if (name !== COLLECTIONS.suppressionSources || failed) return real;
    return new Proxy(real, {
      get: (target, property) => {
        const value = Reflect.get(target, property, target);
        if (property !== 'insert' || failed) return typeof value === 'function' ? value.bind(target) : value;
        return async () => {
          failed = true;
          throw new Error('stopped before recording the bounce as handled (injected)');
        };
      },
    });
  };
  return { failed: () => failed, restore: () => (documents.collection = collection) };
}

test('a handling that stopped after appending its event, handled again, appends no second one', async (ctx) => {
  const hidden = 'third.party@two.example.org';
  const failing = failSourceRecordOnce(ctx.t.stores.documents);
  try {
    await bounceBcc(ctx, hidden, await sendWithBcc(ctx, hidden));
    await waitUntil(() => failing.failed(), 'the first handling recorded the block and stopped', 20_000);
    // The runner hands the bounce over again; the suppressor is done with it once its offset is committed.
    await processorsCaughtUp(ctx.t, ['suppressor']);
  } finally {
    failing.restore();
  }
  const history = await historyOf(ctx, hidden);
  assert.equal(history.map((e) => e.type), ['RecipientSuppressed'], 'the block is recorded once');
  assert.is((await entryOf(ctx, hidden))?.lastEventId, history[0].id);
  assert.ok((await listed(ctx)).some((s) => s.address === hidden));
  // The handling came again and finished: the bounce is recorded as handled, under the block's own event.
  const sources = await suppressionSourcesOf(ctx.t.stores.documents).find({ where: { address: hidden } });
  assert.equal(sources.map((s) => s.eventId), [history[0].id]);
});

test.run();
