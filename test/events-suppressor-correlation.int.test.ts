// DEFECT: the RecipientSuppressed the suppressor writes for a hard bounce or a complaint breaks
// the correlation chain: its metadata.correlationId is the id of the email event it reacted to,
// not the outside request that started the chain.
//
// What the catalog promises (every message's payload, metadata.correlationId; docs/analysing-events.md,
// "Every event"): correlationId is "the outside request (HTTP request id, CLI run) that started the
// chain", causationId "the immediate cause: the request, or the event a processor reacted to".
// Every other processor keeps it (the sender's DeliveryClaimed … DeliveryAttempted carry the send
// request's id), so an analyst grouping by correlationId finds the suppression apart from the send
// (or the report) that caused it.
//
// Where: apps/processors/suppressor.ts:12 passes upcastEmailEvent(event), which keeps no metadata
// (domain/email/upcast.ts:28), to applyAutomaticSuppression; its originOfEvent(event)
// (apps/services/feedback/auto-suppression.ts:86, domain/events/metadata.ts originOfEvent) then
// finds no correlationId and falls back to the event's own id.
//
// Suggested fix: give applyAutomaticSuppression the stored event's metadata (e.g. the origin
// originOfEvent(storedEvent) computed in the processor, or a RecordedEmailEvent that keeps
// `metadata`), so that correlationId is the cause's correlationId.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { arf, deliverReport } from './support/reports.ts';
import { REFUSING_DOMAIN, allCaughtUp, exportEvents, returnPathOf, sendOverHttp, startCatalogFlow, waitForEmail, type CatalogFlow, type ExportedEvent } from './support/catalog-flow.ts';

const test = suite<{ flow: CatalogFlow }>('the suppressor\'s events in the correlation chain');

test.before(async (ctx) => {
  ctx.flow = await startCatalogFlow();
});

test.after(async (ctx) => {
  await ctx.flow?.close();
});

test('a block keeps the correlation id of the send or the report that caused it, and names that event as its cause', async ({ flow }) => {
  const { id } = await sendOverHttp(flow, {
    from: `hello@${flow.tenant.domain}`, to: [`gone@${REFUSING_DOMAIN}`, 'dora@one.example.org'], subject: 'Hello', text: 'hi',
  });
  await waitForEmail(flow, id, (d) => d.recipients[1].status === 'sent', 'is attempted');
  await deliverReport(flow.inbound.port, returnPathOf(flow, id, 'dora@one.example.org'), arf({ recipient: 'dora@one.example.org' }));
  await allCaughtUp(flow);
  const events = await exportEvents(flow);
  const byId = new Map(events.map((e) => [e.id, e]));
  const accepted = events.find((e) => e.streamId === `email-${id}` && e.type === 'EmailAccepted')!;
  const blocks = events.filter((e) => e.type === 'RecipientSuppressed' && e.data.by.kind === 'email_event' && e.data.by.emailId === id);
  assert.equal(blocks.map((b) => b.data.reason).sort(), ['complaint', 'hard_bounce'], 'the refusal and the complaint each blocked their recipient');
  const chains = blocks.map((block) => {
    const cause = byId.get(block.data.by.eventId) as ExportedEvent;
    return { block: block.data.reason, cause: cause.type, causationId: block.metadata.causationId === cause.id, correlationId: block.metadata.correlationId, expected: cause.metadata.correlationId };
  });
  // The sender's own events keep the request's correlation id: the chain the block should join.
  assert.ok(chains.find((c) => c.cause === 'DeliveryAttempted')!.expected === accepted.metadata.correlationId, 'the attempt carries the send request\'s id');
  assert.equal(
    chains.map((c) => ({ ...c, correlationId: c.correlationId === c.expected ? 'the cause\'s correlationId' : `${c.correlationId} (the cause's event id), not ${c.expected}` })),
    chains.map((c) => ({ ...c, causationId: true, correlationId: 'the cause\'s correlationId' })),
  );
});

test.run();
