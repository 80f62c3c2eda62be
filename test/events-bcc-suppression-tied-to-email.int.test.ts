// DEFECT: the RecipientSuppressed a BCC recipient's hard bounce or complaint writes can be tied,
// from the exported events alone, to the email (and the event) it was a BCC recipient of, which
// its cause `{kind: "bcc_recipient_event"}` exists to prevent.
//
// What the catalog promises (SuppressionCauseSchema, bcc_recipient_event; docs/analysing-events.md,
// Streams): "which email, event or report is never said (nor by the metadata), so that the address
// is not tied to the email it was a BCC recipient of". The event does say it, twice over:
// - its event id is blockEventId(emailEventId, address), a public, unkeyed derivation
//   (sha256 of "relay automatic suppression\n<event id>\n<address>" as a UUID): anyone holding the
//   export hashes each email event's id with the address the suppression names, and the one that
//   matches is the email's DeliveryAttempted or RecipientReported;
// - its `occurredAt` is that email event's `occurredAt`, to the millisecond.
//
// Where: apps/services/feedback/auto-suppression.ts:41-47 (blockEventId: unkeyed) and :102/:95
// (used as the event id whoever the recipient was), and :81 (createdAt, the occurredAt of the
// change, copied from the email event's occurredAt, also for a BCC recipient).
//
// Suggested fix: for a BCC recipient derive the event id with a keyed MAC (secrets.mac with a
// purpose of its own: still the same on every handling, so the retry stays idempotent, but not
// computable from the export), and record the instant of the change itself (deps.now()) rather
// than the email event's; the suppression entry's createdAt likewise.
import { createHash } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { deliverReport, dsn } from './support/reports.ts';
import { REFUSING_DOMAIN, allCaughtUp, exportEvents, returnPathOf, sendOverHttp, startCatalogFlow, waitForEmail, type CatalogFlow, type ExportedEvent } from './support/catalog-flow.ts';

const test = suite<{ flow: CatalogFlow }>('a BCC recipient\'s automatic suppression');

test.before(async (ctx) => {
  ctx.flow = await startCatalogFlow();
});

test.after(async (ctx) => {
  await ctx.flow?.close();
});

/** What an analyst computes from the export: the id an unkeyed derivation gives (email event id, address). */
function derivedId(eventId: string, address: string): string {
  const bytes = createHash('sha256').update(`relay automatic suppression\n${eventId}\n${address}`).digest().subarray(0, 16);
  bytes[6] = (bytes[6] & 0x0f) | 0x80;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** For each BCC suppression of the export, the email events it can be tied to, and how. */
function ties(events: ExportedEvent[]): string[] {
  const emailEvents = events.filter((e) => e.streamId.startsWith('email-'));
  const found: string[] = [];
  for (const s of events.filter((e) => e.type === 'RecipientSuppressed' && e.data.by.kind === 'bcc_recipient_event')) {
    for (const e of emailEvents) {
      if (derivedId(e.id, s.data.address) === s.id) found.push(`${s.data.address}: its event id is derived from ${e.type} ${e.streamId}@${e.revision}`);
      if (e.data.occurredAt === s.data.occurredAt) found.push(`${s.data.address}: its occurredAt ${s.data.occurredAt} is that of ${e.type} ${e.streamId}@${e.revision}`);
    }
  }
  return found;
}

test('neither its id nor its time names the email of the BCC recipient', async ({ flow }) => {
  const refused = `silent.partner@${REFUSING_DOMAIN}`;
  const bounced = 'quiet.watcher@two.example.org';
  const { id } = await sendOverHttp(flow, {
    from: `hello@${flow.tenant.domain}`, to: ['ann@one.example.org'], bcc: [refused, bounced], subject: 'Board minutes', text: 'hi',
  });
  await waitForEmail(flow, id, (d) => d.status === 'sent', 'is sent');
  await deliverReport(flow.inbound.port, returnPathOf(flow, id, bounced), dsn({ recipient: bounced, action: 'failed', status: '5.1.1', diagnostic: '550 5.1.1 User unknown' }));
  // Positive marker: both blocks are on the list (the suppressor appends each event before it is done).
  await allCaughtUp(flow);
  const events = await exportEvents(flow);
  const blocks = events.filter((e) => e.type === 'RecipientSuppressed' && e.data.by.kind === 'bcc_recipient_event');
  assert.equal(blocks.map((e) => e.data.address).sort(), [bounced, refused].sort(), 'each BCC recipient was blocked, its cause naming no email');
  for (const block of blocks) {
    assert.equal(block.data.by, { kind: 'bcc_recipient_event' });
    const emailEventIds = new Set(events.filter((e) => e.streamId === `email-${id}`).map((e) => e.id));
    assert.not.ok(emailEventIds.has(block.metadata.causationId) || emailEventIds.has(block.metadata.correlationId), 'its metadata names no email event');
  }
  assert.equal(ties(events), [], 'nothing in the export ties a BCC recipient\'s block to its email');
});

test.run();
