// A `relay projections rebuild emails` interrupted (Ctrl-C, SIGKILL, a crash) after its swap
// and before its catch-up has run: the events the live projector applied to the old collection
// while the rebuild ran went with it, the projector never sees them again, and only the catch-up
// brings them back. The catch-up owed is recorded before the swap, `relay projections scratch`
// lists it, and it is finished by the projection's processor when it starts, or first thing by
// the next rebuild of the projection (even one `--into` a scratch collection, which otherwise
// leaves the live read model alone); nothing is parked, and no record is left after it.
//
// The interruption is the rebuild's own progress callback throwing as the rebuild reports
// `catching-up` (the point right after the swap, as the CLI prints it): what a kill there
// leaves in the stores is the same.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { EMAILS_PROJECTION } from '../apps/services/projection-registry.ts';
import { rebuildProjection } from '../apps/services/rebuild.ts';
import { listScratch } from '../apps/services/scratch-collections.ts';
import { parkedEventsOf } from '../apps/services/parked-events.ts';
import { startProcessor } from '../apps/processors/processor.ts';
import { PROCESSORS } from '../apps/processors/registry.ts';
import { emailStreamId } from '../domain/email/events.ts';
import type { EventStore } from '../infra/ports/event-store.ts';
import type { EmailView } from '../projections/email-view.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { accepted, claimed, toNewEvent } from './support/email-events.ts';
import { waitUntil } from './support/eventually.ts';
import { processorsCaughtUp } from './support/markers.ts';
import { runRelay } from './support/relay-process.ts';
import { withHookAfterRead } from './support/rebuild-hooks.ts';

const test = suite<{ t: TestApp }>('a rebuild interrupted after its swap');

test.before(async (ctx) => {
  ctx.t = await startTestApp({}, { processors: ['projector'] });
});

test.after(async (ctx) => {
  await ctx.t.close();
});

/**
 * An accepted email whose claim only the live projector applies, to the old collection while
 * the rebuild runs; then the rebuild swaps and is interrupted.
 */
async function interruptedRebuild(t: TestApp, emailId: string): Promise<void> {
  const emails = t.stores.documents.collection<EmailView>(COLLECTIONS.emails);
  const stream = emailStreamId(emailId);
  await t.stores.events.append(stream, [toNewEvent(accepted({ emailId }))], { expectedRevision: 'no_stream' });
  await waitUntil(async () => (await emails.get(emailId))?.streamRevision === 0, 'the live projector has the email');

  // Read 1 counts, read 2 is the rebuild's pass over the store: right after it has read, the
  // email is claimed and the live projector applies the claim (to the collection still live).
  const events = withHookAfterRead(t.stores.events, 2, async () => {
    await t.stores.events.append(stream, [toNewEvent(claimed())], { expectedRevision: 0 });
    await waitUntil(async () => (await emails.get(emailId))?.streamRevision === 1, 'the live projector applied the claim before the swap');
  });
  let swapped = false;
  try {
    await rebuildProjection(t.stores.documents, events, EMAILS_PROJECTION, {
      name: 'emails',
      onProgress: (p) => {
        if (p.phase !== 'catching-up') return;
        swapped = true;
        throw new Error('the rebuild process was killed');
      },
    });
    assert.unreachable('the rebuild was interrupted');
  } catch (error) {
    assert.match((error as Error).message, /killed/);
  }
  assert.ok(swapped, 'the rebuild got as far as its swap');

  // The live projector has handled everything there is; the claim is its stream's last event.
  await processorsCaughtUp(t, ['projector']);
  const last = (await t.stores.events.readStream(stream)).at(-1)!;
  assert.is(last.type, 'DeliveryClaimed');
  // Until the catch-up runs, the swapped-in model lacks the claim.
  assert.is((await emails.get(emailId))?.streamRevision, 0, 'the swapped-in document is behind its stream');
}

async function assertCaughtUp(t: TestApp, emailId: string): Promise<void> {
  const last = (await t.stores.events.readStream(emailStreamId(emailId))).at(-1)!;
  const view = await t.stores.documents.collection<EmailView>(COLLECTIONS.emails).get(emailId);
  assert.is(view?.streamRevision, last.revision, 'the read model has the last event of the stream');
  assert.is(view?.status, 'processing', 'GET /v1/emails/:id shows the claim');
  assert.is(await parkedEventsOf(t.stores.documents).count(), 0, 'nothing parked');
}

test('relay projections scratch lists the catch-up owed, and the projection\'s processor finishes it when it starts', async ({ t }) => {
  const emailId = 'em_interrupted_processor';
  await interruptedRebuild(t, emailId);

  const listed = await runRelay(['projections', 'scratch', '--json'], { RELAY_DATA_DIR: t.config.dataDir });
  assert.is(listed.code, 0, listed.stderr);
  const records = listed.stdout.trim().split('\n').map((line) => JSON.parse(line));
  assert.is(records.length, 1, listed.stdout);
  assert.is(records[0].projection, 'emails');
  assert.is(records[0].state, 'swapped');
  assert.type(records[0].catchUpAfter, 'string', 'the position the catch-up reads after');
  assert.match(records[0].collection, /^emails__rebuild_\d+$/);

  // A projector starts (a restart, another instance): it finishes what is owed, and the record goes.
  const projector = PROCESSORS.find((p) => p.name === 'projector')!;
  const started = await startProcessor(projector, {
    config: t.config, events: t.stores.events, documents: t.stores.documents, log: t.stores.log, services: t.ctx.services,
    now: () => new Date(), onError: () => {},
  });
  try {
    await waitUntil(async () => (await listScratch(t.stores.documents)).length === 0, 'the owed catch-up is finished and its record forgotten');
  } finally {
    await started.stop();
  }
  assert.equal(await listScratch(t.stores.documents), []);
  await assertCaughtUp(t, emailId);
});

test('the next relay projections rebuild finishes it first, even one --into a scratch collection', async ({ t }) => {
  const emailId = 'em_interrupted_rebuild';
  await interruptedRebuild(t, emailId);
  const [owed] = await listScratch(t.stores.documents);
  assert.is(owed?.state, 'swapped');

  const run = await runRelay(['projections', 'rebuild', 'emails', '--into', 'emails_compare'], { RELAY_DATA_DIR: t.config.dataDir });
  assert.is(run.code, 0, run.stderr);
  assert.match(run.stderr, new RegExp(`finished first the catch-up ${owed._id} owed after its swap`));
  assert.equal((await listScratch(t.stores.documents)).map((r) => [r._id, r.state]), [['emails_compare', 'built']], 'only the --into collection is left');
  await assertCaughtUp(t, emailId);
});

test.run();
