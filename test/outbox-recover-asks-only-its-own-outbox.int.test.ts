// Outbox crash recovery (apps/services/delivery/attempt.ts settle, infra/mail/outbox-transport.ts
// OutboxTransport.settle, decided by domain/email/delivery.ts decideRecovery) asks only the very
// outbox directory the claim wrote to. A claim records the outbox's id beside the transport's
// name (DeliveryClaimed.transportInstance: the id file the outbox directory holds), and a sender
// whose outbox is another directory (senders on two hosts over the shared distributed stores,
// each with its own RELAY_DATA_DIR; or a sender restarted with another RELAY_DATA_DIR) is not
// asked: "not in my envelope file" would record a message the dead sender wrote whole as "not
// written to the outbox", `delayed`, and write it again into the second outbox (the recipient's
// message twice), where the port's contract (infra/ports/mail-transport.ts, MailTransport.settle)
// keeps `not_sent` for "sending it again gives the recipient one copy". Such a recipient ends
// delivery_unknown and is not sent again (docs/delivery.md), as one of a claim made with another
// transport; so does one of a claim recorded before claims named their outbox.
//
// Here: one event store (the shared one), two outbox directories, each warmed as a starting
// sender warms its transport. The dead sender (host A) wrote the To recipient's message into its
// outbox; a sender recovers the claim once its grace is over.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { runDeliveryStep, type DeliveryDeps } from '../apps/services/delivery/attempt.ts';
import type { WorkItem } from '../apps/services/delivery/work-items.ts';
import { emailsOf, readEmailStream } from '../apps/services/email-stream.ts';
import { DELIVERY_POLICY } from '../domain/email/delivery.ts';
import { emailStreamId, type DeliveryAttempted, type DeliveryFailed } from '../domain/email/events.ts';
import { pendingRecipients } from '../domain/email/state.ts';
import { OutboxTransport } from '../infra/mail/outbox-transport.ts';
import type { MailTransport, OpenTransaction } from '../infra/ports/mail-transport.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';
import { SqliteEventStore } from '../infra/sqlite/event-store.ts';
import { accepted, after, claimed, TO, TO_INDEX, toNewEvent } from './support/email-events.ts';

interface Context {
  root: string;
  events: SqliteEventStore;
  documents: SqliteDocumentStore;
  hostA: OutboxTransport;
  hostB: OutboxTransport;
  /** What recovery asked the transport it was given. */
  asked: OpenTransaction[];
}

const EMAIL = 'em_test1';
const MESSAGE_ID = `${EMAIL}@example.test`;
const BEGUN_AT = after(1_500);
const RECOVERY_AT = new Date(Date.parse(BEGUN_AT) + DELIVERY_POLICY.claimGraceMs + 1_000);
const outboxA = (ctx: Context) => join(ctx.root, 'host-a', 'outbox');
const outboxB = (ctx: Context) => join(ctx.root, 'host-b', 'outbox');

const test = suite<Context>('outbox recovery asks only the outbox the claim wrote to');

test.before.each(async (ctx) => {
  ctx.root = mkdtempSync(join(tmpdir(), 'relay-recover-own-outbox-'));
  ctx.events = new SqliteEventStore(join(ctx.root, 'events.db'));
  ctx.documents = new SqliteDocumentStore(join(ctx.root, 'documents.db'));
  ctx.hostA = new OutboxTransport(outboxA(ctx));
  ctx.hostB = new OutboxTransport(outboxB(ctx));
  await Promise.all([ctx.hostA.warm(), ctx.hostB.warm()]);
  ctx.asked = [];
});

test.after.each(async (ctx) => {
  await ctx.hostA.close();
  await ctx.hostB.close();
  await ctx.events.close();
  await ctx.documents.close();
  rmSync(ctx.root, { recursive: true, force: true });
});

/**
 * Host A's sender: claimed with its outbox (`transportInstance`, as the claim recorded it),
 * began the To transaction (durable), wrote it whole, then died before recording.
 */
async function writtenByHostA(ctx: Context, transportInstance: string | undefined): Promise<WorkItem> {
  await ctx.events.append(emailStreamId(EMAIL), [
    accepted({ ccAddresses: [], cc: [] }),
    claimed({ transport: 'outbox', ...(transportInstance === undefined ? {} : { transportInstance }), claimedBy: 'host-a:1234:abcd', occurredAt: after(1_000) }),
    { type: 'DeliveryTransactionStarted', data: { attempt: 1, recipients: [TO_INDEX], occurredAt: BEGUN_AT } },
  ].map(toNewEvent), { expectedRevision: 'no_stream' });
  const written = await ctx.hostA.send({ emailId: EMAIL, envelope: { mailFrom: 'rr-to@bounce.example.test', recipients: [TO] }, raw: Buffer.from('Subject: hi\r\n\r\nhi\r\n'), messageId: MESSAGE_ID });
  assert.is(written.recipients[0].result, 'accepted', 'host A wrote it');
  const envelopeA = join(outboxA(ctx), `${EMAIL}.envelope.json`);
  assert.equal(JSON.parse(readFileSync(envelopeA, 'utf8')).map((e: { recipients: string[] }) => e.recipients), [[TO]], 'in host A\'s outbox, whole');
  return { _id: EMAIL, step: 'recover', attempt: 1, dueAt: new Date(RECOVERY_AT.getTime() - 1_000).toISOString(), streamRevision: 2, origin: { correlationId: 'c', causationId: 'c' } };
}

/** The recovering sender's dependencies, with `outbox` as its transport (what it is asked is kept). */
function recoveringWith(ctx: Context, outbox: OutboxTransport): DeliveryDeps {
  const transport: MailTransport = {
    name: outbox.name,
    instance: outbox.instance,
    send: (message, options) => outbox.send(message, options),
    settle: (transaction) => {
      ctx.asked.push(transaction);
      return outbox.settle(transaction);
    },
    close: () => outbox.close(),
  };
  return {
    events: ctx.events, documents: ctx.documents, secrets: {} as never, transport, sendRate: {} as never,
    emails: emailsOf(ctx.events, { delivery: DELIVERY_POLICY }), policy: DELIVERY_POLICY, now: () => RECOVERY_AT,
  };
}

/** The To recipient's outcome as recovery recorded it: the event type, its status and failure code. */
async function toRecipientOutcome(ctx: Context): Promise<[string, string | undefined, string | null | undefined]> {
  const last = (await readEmailStream(ctx.events, EMAIL)).at(-1)!;
  if (last.type === 'DeliveryAttempted') {
    const to = (last as DeliveryAttempted).data.recipients.find((r) => r.index === TO_INDEX);
    return [last.type, to?.status, to?.failureCode ?? null];
  }
  if (last.type === 'DeliveryFailed') {
    const failed = (last as DeliveryFailed).data;
    return [last.type, failed.recipients.some((r) => r.index === TO_INDEX) ? 'failed' : undefined, failed.failureCode];
  }
  return [last.type, undefined, undefined];
}

test('the two outbox directories have ids of their own', (ctx) => {
  assert.type(ctx.hostA.instance, 'string');
  assert.type(ctx.hostB.instance, 'string');
  assert.is.not(ctx.hostA.instance, ctx.hostB.instance);
});

test('written whole into host A\'s outbox, recovered by host B\'s sender: not asked, delivery_unknown, not written again', async (ctx) => {
  const item = await writtenByHostA(ctx, ctx.hostA.instance);
  assert.is(await runDeliveryStep(recoveringWith(ctx, ctx.hostB), item), 'recovered');
  assert.equal(ctx.asked, [], 'host B\'s outbox holds none of host A\'s transactions: it is not asked');
  assert.equal(await toRecipientOutcome(ctx), ['DeliveryFailed', 'failed', 'delivery_unknown']);
  const { state } = await emailsOf(ctx.events, { delivery: DELIVERY_POLICY }).load(EMAIL);
  assert.not.ok(pendingRecipients(state.delivery).includes(TO_INDEX), 'the To recipient is not sent again');
  assert.not.ok(existsSync(join(outboxB(ctx), `${EMAIL}.envelope.json`)), 'host B\'s outbox never held it');
  // What host B would have said, had it been asked: the answer that would have sent it twice.
  const answer = await ctx.hostB.settle({ emailId: EMAIL, messageId: MESSAGE_ID, recipients: [TO] });
  assert.equal(answer.map((a) => a.result), ['not_sent']);
});

test('written whole into host A\'s outbox, recovered by a sender restarted on the same directory: asked, the To recipient sent', async (ctx) => {
  const item = await writtenByHostA(ctx, ctx.hostA.instance);
  const restarted = new OutboxTransport(outboxA(ctx));
  try {
    await restarted.warm();
    assert.is(restarted.instance, ctx.hostA.instance, 'the directory keeps its id across transports (a restart)');
    assert.is(await runDeliveryStep(recoveringWith(ctx, restarted), item), 'recovered');
    assert.equal(ctx.asked, [{ emailId: EMAIL, messageId: MESSAGE_ID, recipients: [TO] }]);
    assert.equal(await toRecipientOutcome(ctx), ['DeliveryAttempted', 'sent', null]);
  } finally {
    await restarted.close();
  }
});

test('a claim recorded before claims named their outbox, recovered even by the outbox it wrote to: not asked, delivery_unknown as before', async (ctx) => {
  const item = await writtenByHostA(ctx, undefined);
  assert.is(await runDeliveryStep(recoveringWith(ctx, ctx.hostA), item), 'recovered');
  assert.equal(ctx.asked, [], 'which outbox it wrote to is not known');
  assert.equal(await toRecipientOutcome(ctx), ['DeliveryFailed', 'failed', 'delivery_unknown']);
});

test('a sender whose outbox has no id (never warmed, or it could not be read): not asked, delivery_unknown', async (ctx) => {
  const item = await writtenByHostA(ctx, ctx.hostA.instance);
  const cold = new OutboxTransport(outboxA(ctx));
  try {
    assert.is(cold.instance, undefined);
    assert.is(await runDeliveryStep(recoveringWith(ctx, cold), item), 'recovered');
    assert.equal(ctx.asked, []);
    assert.equal(await toRecipientOutcome(ctx), ['DeliveryFailed', 'failed', 'delivery_unknown']);
  } finally {
    await cold.close();
  }
});

test.run();
