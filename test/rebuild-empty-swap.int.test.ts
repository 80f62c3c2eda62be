// A rebuild whose rebuilt collection holds no document (the projection's streams were empty when
// it read them), with a processor of the projection starting between the rebuild recording its
// swap and renaming. The scratch collection is empty but not renamed: the processor must leave
// the swap to the rebuild and not take the catch-up for done. Otherwise it catches the old
// collection up, forgets the record, and a rebuild that then dies right after its rename leaves
// the swapped-in model without what the live projector applied meanwhile, with nothing owed.
//
// The rebuild's death is its own progress callback throwing as it reports `catching-up` (right
// after the rename), as test/rebuild-interrupted-after-swap.int.test.ts does.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startProcessor } from '../apps/processors/processor.ts';
import { PROCESSORS } from '../apps/processors/registry.ts';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { EMAILS_PROJECTION } from '../apps/services/projection-registry.ts';
import { rebuildProjection } from '../apps/services/rebuild.ts';
import { listScratch } from '../apps/services/scratch-collections.ts';
import { emailStreamId } from '../domain/email/events.ts';
import type { DocumentStore } from '../infra/ports/document-store.ts';
import type { EventStore } from '../infra/ports/event-store.ts';
import type { EmailView } from '../projections/email-view.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { accepted, toNewEvent } from './support/email-events.ts';
import { waitUntil } from './support/eventually.ts';
import { processorsCaughtUp } from './support/markers.ts';
import { withHookAfterRead } from './support/rebuild-hooks.ts';

const test = suite<{ t: TestApp }>('a rebuild of no document, between recording its swap and renaming');

test.before(async (ctx) => {
  ctx.t = await startTestApp({}, { processors: ['projector'] });
});

test.after(async (ctx) => {
  await ctx.t.close();
});

/** The document store, but `before` runs once right before the first rename. */
function withHookBeforeRename(documents: DocumentStore, before: () => Promise<void>): DocumentStore {
  let done = false;
  return new Proxy(documents, {
    get(target, property) {
      if (property === 'rename') {
        return async (from: string, to: string) => {
          if (!done) {
            done = true;
            await before();
          }
          await target.rename(from, to);
        };
      }
      const value = Reflect.get(target, property);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/** A projector starting (a restart, another instance), its info messages collected. */
function startProjector(t: TestApp, infos: string[]) {
  const projector = PROCESSORS.find((p) => p.name === 'projector')!;
  return startProcessor(projector, {
    config: t.config, events: t.stores.events, documents: t.stores.documents, log: t.stores.log, services: t.ctx.services,
    now: () => new Date(), onError: () => {}, onInfo: (message) => infos.push(message),
  });
}

const LOOKED_AT_SWAP = /recorded a swap not renamed yet|finished the catch-up of/;

test('a processor starting then leaves the swap to the rebuild, and a rebuild that dies after its rename still owes its catch-up', async ({ t }) => {
  const emails = t.stores.documents.collection<EmailView>(COLLECTIONS.emails);
  const emailId = 'em_during_empty_rebuild';
  assert.is(await emails.count(), 0, 'no email yet: the rebuild will hold no document');

  // Read 1 counts, read 2 is the rebuild's pass (both find nothing): right after it, an email is
  // accepted and the live projector applies it to the collection still live.
  const events = withHookAfterRead(t.stores.events, 2, async () => {
    await t.stores.events.append(emailStreamId(emailId), [toNewEvent(accepted({ emailId }))], { expectedRevision: 'no_stream' });
    await waitUntil(async () => (await emails.get(emailId)) !== null, 'the live projector applied the email to the old collection');
    await processorsCaughtUp(t, ['projector']);
  });

  const whileUnrenamed: string[] = [];
  let scratch = '';
  const documents = withHookBeforeRename(t.stores.documents, async () => {
    const [record] = await listScratch(t.stores.documents);
    assert.is(record?.state, 'swapped', 'the swap is recorded before the rename');
    scratch = record._id;
    assert.is(await t.stores.documents.collection(scratch).count(), 0, 'the rebuilt collection holds no document');
    const started = await startProjector(t, whileUnrenamed);
    try {
      await waitUntil(() => whileUnrenamed.some((m) => LOOKED_AT_SWAP.test(m)), 'the starting projector looked at the recorded swap');
    } finally {
      await started.stop();
    }
  });

  let renamed = false;
  try {
    await rebuildProjection(documents, events, EMAILS_PROJECTION, {
      name: 'emails',
      onProgress: (p) => {
        if (p.phase !== 'catching-up') return;
        renamed = true;
        throw new Error('the rebuild process was killed');
      },
    });
    assert.unreachable('the rebuild was interrupted');
  } catch (error) {
    assert.match((error as Error).message, /killed/);
  }
  assert.ok(renamed, 'the rebuild got as far as its rename');
  assert.is(await t.stores.documents.exists(scratch), false, 'renamed over the live collection');
  await processorsCaughtUp(t, ['projector']);
  assert.is(await emails.get(emailId), null, 'the swapped-in model lacks the email the live projector applied to the old one');

  // The catch-up is still owed, and the processor left the swap alone while it was not renamed.
  assert.equal((await listScratch(t.stores.documents)).map((r) => [r._id, r.state]), [[scratch, 'swapped']], 'the catch-up is still owed');
  const looked = whileUnrenamed.filter((m) => LOOKED_AT_SWAP.test(m));
  assert.equal(looked, [`projector: ${scratch} recorded a swap not renamed yet (a rebuild under way, or one that died renaming): relay projections rebuild emails finishes it`]);

  // The next start of the processor finishes it.
  const started = await startProjector(t, []);
  try {
    await waitUntil(async () => (await listScratch(t.stores.documents)).length === 0, 'the owed catch-up is finished and its record forgotten');
  } finally {
    await started.stop();
  }
  assert.is((await emails.get(emailId))?.streamRevision, 0, 'the read model has the email again');
});

test.run();
