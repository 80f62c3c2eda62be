// The sender's recovery step (apps/services/delivery/attempt.ts, runDeliveryStep 'recover') on a
// real event store, document store and outbox directory: a claim left open past its grace with
// its transactions begun is settled by the transport when the claim sent with it, that very
// outbox directory (the claim's transportInstance: the outbox writes what it holds as the
// attempt's outcome, the same observer calls a send makes), and is declared delivery_unknown,
// without asking, when the claim sent with another transport (a restart with another
// RELAY_DELIVERY: the outbox knows nothing of a smarthost's transactions). Another outbox
// directory's claims: outbox-recover-asks-only-its-own-outbox.int.test.ts.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { runDeliveryStep, type DeliveryDeps, type DeliveryObserver } from '../apps/services/delivery/attempt.ts';
import { workItems, type WorkItem } from '../apps/services/delivery/work-items.ts';
import { emailsOf, readEmailStream } from '../apps/services/email-stream.ts';
import { DELIVERY_POLICY } from '../domain/email/delivery.ts';
import { emailStreamId, type DeliveryAttempted, type DeliveryFailed } from '../domain/email/events.ts';
import { OutboxTransport } from '../infra/mail/outbox-transport.ts';
import type { MailTransport, OpenTransaction } from '../infra/ports/mail-transport.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';
import { SqliteEventStore } from '../infra/sqlite/event-store.ts';
import { accepted, after, CC, CC_INDEX, claimed, TO, TO_INDEX, toNewEvent } from './support/email-events.ts';

interface Context {
  root: string;
  events: SqliteEventStore;
  documents: SqliteDocumentStore;
  outbox: OutboxTransport;
  asked: OpenTransaction[];
  observed: { attempted: DeliveryAttempted['data'][]; failed: DeliveryFailed['data'][] };
}

const EMAIL = 'em_test1';
const MESSAGE_ID = `${EMAIL}@example.test`;
/** The To and CC transactions began at +1.5 s; the BCC one never did. */
const BEGUN_AT = after(1_500);
const RECOVERY_AT = new Date(Date.parse(BEGUN_AT) + DELIVERY_POLICY.claimGraceMs + 1_000);

const test = suite<Context>('recovery asks the transport the claim sent with');

test.before.each(async (ctx) => {
  ctx.root = mkdtempSync(join(tmpdir(), 'relay-recover-settle-'));
  ctx.events = new SqliteEventStore(join(ctx.root, 'events.db'));
  ctx.documents = new SqliteDocumentStore(join(ctx.root, 'documents.db'));
  ctx.outbox = new OutboxTransport(join(ctx.root, 'outbox'));
  // As the sender does at start: the outbox reads (here makes) its directory's id.
  await ctx.outbox.warm();
  assert.type(ctx.outbox.instance, 'string');
  ctx.asked = [];
  ctx.observed = { attempted: [], failed: [] };
});

test.after.each(async (ctx) => {
  await ctx.outbox.close();
  await ctx.events.close();
  await ctx.documents.close();
  rmSync(ctx.root, { recursive: true, force: true });
});

/** The email admitted, claimed with `transport` (the outbox: this one's directory), its To and CC transactions begun, nothing recorded since. */
async function leftOpen(ctx: Context, transport: string): Promise<WorkItem> {
  await ctx.events.append(emailStreamId(EMAIL), [
    accepted(),
    claimed({ transport, ...(transport === 'outbox' ? { transportInstance: ctx.outbox.instance } : {}), occurredAt: after(1_000) }),
    { type: 'DeliveryTransactionStarted', data: { attempt: 1, recipients: [TO_INDEX], occurredAt: BEGUN_AT } },
    { type: 'DeliveryTransactionStarted', data: { attempt: 1, recipients: [CC_INDEX], occurredAt: BEGUN_AT } },
  ].map(toNewEvent), { expectedRevision: 'no_stream' });
  return { _id: EMAIL, step: 'recover', attempt: 1, dueAt: new Date(RECOVERY_AT.getTime() - 1_000).toISOString(), streamRevision: 3, origin: { correlationId: 'c', causationId: 'c' } };
}

function deps(ctx: Context): DeliveryDeps {
  const outbox = ctx.outbox;
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
  const observe: DeliveryObserver = {
    attempted: (_message, outcome) => void ctx.observed.attempted.push(outcome),
    failed: (_message, failure) => void ctx.observed.failed.push(failure),
  };
  return {
    events: ctx.events, documents: ctx.documents, secrets: {} as never, transport, sendRate: {} as never,
    emails: emailsOf(ctx.events, { delivery: DELIVERY_POLICY }), policy: DELIVERY_POLICY, now: () => RECOVERY_AT, observe,
  };
}

test('a claim the outbox sent: the To written is sent, the CC not written and the BCC not begun are retried', async (ctx) => {
  const item = await leftOpen(ctx, 'outbox');
  // The dead sender's To write completed; its CC write never placed anything.
  await ctx.outbox.send({ emailId: EMAIL, envelope: { mailFrom: 'rr-to@bounce.example.test', recipients: [TO] }, raw: Buffer.from('Subject: hi\r\n\r\nhi\r\n'), messageId: MESSAGE_ID });
  assert.is(await runDeliveryStep(deps(ctx), item), 'recovered');
  assert.equal(ctx.asked, [{ emailId: EMAIL, messageId: MESSAGE_ID, recipients: [TO, CC] }], 'asked about the begun visible recipients (the BCC one never began)');
  const last = (await readEmailStream(ctx.events, EMAIL)).at(-1)!;
  assert.is(last.type, 'DeliveryAttempted');
  const outcome = (last as DeliveryAttempted).data;
  assert.equal(outcome.recipients.map((r) => [r.index, r.status, r.providerMessageId ?? null, r.failureCode ?? null]), [
    [0, 'sent', MESSAGE_ID, null],
    [1, 'delayed', null, null],
    [2, 'delayed', null, null],
  ]);
  assert.is(outcome.transport, 'outbox');
  assert.is(outcome.messageId, MESSAGE_ID);
  assert.is(outcome.providerMessageId, MESSAGE_ID);
  assert.is(outcome.nextAttemptAt, new Date(RECOVERY_AT.getTime() + DELIVERY_POLICY.retryDelaysMs[0]).toISOString());
  assert.equal(ctx.observed, { attempted: [outcome], failed: [] }, 'told as a send\'s outcome');
  const scheduled = await workItems(ctx.documents).get(EMAIL);
  assert.equal([scheduled?.step, scheduled?.attempt, scheduled?.dueAt], ['attempt', 2, outcome.nextAttemptAt], 'the retry is scheduled');
});

test('a claim a smarthost sent, recovered by an outbox sender: not asked, delivery_unknown as before', async (ctx) => {
  const item = await leftOpen(ctx, 'smtp');
  assert.is(await runDeliveryStep(deps(ctx), item), 'recovered');
  assert.equal(ctx.asked, []);
  const last = (await readEmailStream(ctx.events, EMAIL)).at(-1)!;
  assert.is(last.type, 'DeliveryFailed');
  const failure = (last as DeliveryFailed).data;
  assert.is(failure.failureCode, 'delivery_unknown');
  assert.equal(failure.recipients.map((r) => r.index), [TO_INDEX, CC_INDEX]);
  assert.equal(ctx.observed, { attempted: [], failed: [failure] });
});

test('a claim whose grace is not over: not asked, nothing recorded', async (ctx) => {
  const item = await leftOpen(ctx, 'outbox');
  const early = { ...deps(ctx), now: () => new Date(Date.parse(BEGUN_AT) + 1_000) };
  assert.is(await runDeliveryStep(early, item), 'nothing_to_do');
  assert.equal(ctx.asked, []);
  assert.is((await readEmailStream(ctx.events, EMAIL)).length, 4);
});

test.run();
