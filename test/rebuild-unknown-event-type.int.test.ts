// `relay projections rebuild emails` gives exactly the live `emails` read model when a stream ends
// with an event of a type this version does not know (written by a newer Relay; docs: "skip
// them"): the live projector never receives it (its consumer takes only the known types), so the
// fold skips it without advancing streamRevision, and the rebuilt document equals the live one.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { EMAILS_PROJECTION } from '../apps/services/projection-registry.ts';
import { rebuildProjection } from '../apps/services/rebuild.ts';
import { emailStreamId } from '../domain/email/events.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { waitUntil } from './support/eventually.ts';
import { accepted, claimed, toNewEvent, unknownEvent } from './support/email-events.ts';
import { processorsCaughtUp } from './support/markers.ts';

const test = suite<{ t: TestApp }>('rebuild equals live with an unknown event type');

test.before(async (ctx) => {
  ctx.t = await startTestApp({}, { processors: ['projector'] });
});

test.after(async (ctx) => {
  await ctx.t.close();
});

test('the rebuilt document equals the live one', async ({ t }) => {
  await t.stores.events.append(emailStreamId('em_newer1'), [toNewEvent(accepted({ emailId: 'em_newer1' })), toNewEvent(claimed()), toNewEvent(unknownEvent())], { expectedRevision: 'no_stream' });
  // A later email, projected: the forwarder has published everything before it.
  await t.stores.events.append(emailStreamId('em_marker'), [toNewEvent(accepted({ emailId: 'em_marker' }))], { expectedRevision: 'no_stream' });
  const live = t.stores.documents.collection<{ _id: string; streamRevision: number }>(COLLECTIONS.emails);
  await waitUntil(async () => (await live.get('em_marker')) !== null, 'the marker email is projected');
  await processorsCaughtUp(t, ['projector']);
  await rebuildProjection(t.stores.documents, t.stores.events, EMAILS_PROJECTION, { into: 'emails_rebuilt' });
  const { _v: _a, ...liveDoc } = (await live.get('em_newer1')) as { _v?: number; streamRevision: number };
  const { _v: _b, ...rebuilt } = (await t.stores.documents.collection<{ _id: string; streamRevision: number }>('emails_rebuilt').get('em_newer1')) as { _v?: number; streamRevision: number };
  assert.is(liveDoc.streamRevision, rebuilt.streamRevision, 'streamRevision, live vs rebuilt');
  assert.is(rebuilt.streamRevision, 1, 'the last event known to this version');
  assert.equal(liveDoc, rebuilt);
});

test.run();
