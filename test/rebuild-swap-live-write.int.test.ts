// A write of the live projector under way when `relay projections rebuild` swaps its collection
// in does not land on the rebuilt document. The live path reads the document from the old
// collection and writes by compare-and-set on the store's `_v`; the rebuilt documents' versions
// start above every version of the collection they replace, so that write fails like a lost race
// and the projector re-reads the rebuilt document and re-applies the event to it. Otherwise
// whatever the old document got wrong (a field an older version did not project: the very thing a
// rebuild is run for) would be back, and stay.
//
// The live projector here is EMAILS_PROJECTION.apply, its handler (apps/processors/
// projection-processors.ts), on an event that waited (so it looks ahead: it reads the stream's
// later events between its read of the document and its write); the rebuild runs while it reads.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { readEmailStream } from '../apps/services/email-stream.ts';
import { EMAILS_PROJECTION } from '../apps/services/projection-registry.ts';
import { rebuildProjection } from '../apps/services/rebuild.ts';
import { emailStreamId } from '../domain/email/events.ts';
import type { EventStore } from '../infra/ports/event-store.ts';
import { applyToEmailView, type EmailView } from '../projections/email-view.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { CC_INDEX, TO_INDEX, accepted, attempted, claimed, outcome, recorded, toNewEvent } from './support/email-events.ts';
import { waitUntil } from './support/eventually.ts';

const test = suite<{ t: TestApp }>('the live projector writing across a rebuild\'s swap');

test.before(async (ctx) => {
  ctx.t = await startTestApp();
});

test.after(async (ctx) => {
  await ctx.t.close();
});

/** The event store, but `during` runs once before the first readStream returns. */
function withHookOnReadStream(events: EventStore, during: () => Promise<void>): EventStore {
  let done = false;
  return new Proxy(events, {
    get(target, property) {
      if (property === 'readStream') {
        return async (...args: Parameters<EventStore['readStream']>) => {
          const read = await target.readStream(...args);
          if (!done) {
            done = true;
            await during();
          }
          return read;
        };
      }
      const value = Reflect.get(target, property);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

test('the swapped-in model is the fold of the event store, whatever the live projector had in flight', async ({ t }) => {
  const emailId = 'em_swap_in_flight';
  const stream = emailStreamId(emailId);
  const history = [accepted({ emailId }), claimed(), attempted([outcome(TO_INDEX, 'sent'), outcome(CC_INDEX, 'sent')])];
  await t.stores.events.append(stream, history.map(toNewEvent), { expectedRevision: 'no_stream' });

  // The live model as an older version projected the admission: without toAddresses (what the
  // recipient filter of GET /v1/emails matches), inserted once (_v 1). A rebuild backfills it.
  const emails = t.stores.documents.collection<EmailView>(COLLECTIONS.emails);
  const { toAddresses: _missing, ...older } = applyToEmailView(null, recorded(history, emailId)[0])!;
  await emails.insert(older as EmailView);

  // The live projector is behind: the claim has waited, so it looks ahead.
  const [, claim] = await t.stores.events.readStream(stream);
  await waitUntil(() => Date.now() - Date.parse(claim.recordedAt) >= 250, 'the claim has waited long enough for the look-ahead');
  const seen: { rebuilt: EmailView | null } = { rebuilt: null };
  const events = withHookOnReadStream(t.stores.events, async () => {
    const result = await rebuildProjection(t.stores.documents, t.stores.events, EMAILS_PROJECTION, { name: 'emails' });
    assert.ok(result.swapped);
    seen.rebuilt = await emails.get(emailId);
  });
  await EMAILS_PROJECTION.apply(t.stores.documents, events, claim);
  assert.ok(seen.rebuilt, 'the rebuild ran while the live projector read ahead');
  assert.equal(seen.rebuilt!.toAddresses, ['ann@example.test'], 'the rebuild backfilled toAddresses');

  const { _v, ...stored } = (await emails.get(emailId)) as EmailView & { _v: number };
  void _v;
  const folded = (await readEmailStream(t.stores.events, emailId)).reduce(applyToEmailView, null as EmailView | null);
  assert.is(stored.streamRevision, 2);
  assert.equal(stored.toAddresses, ['ann@example.test'], 'toAddresses, as rebuilt from the event store');
  assert.equal(stored, folded);
});

test.run();
