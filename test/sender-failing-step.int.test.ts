// The sender (apps/processors/sender.ts, as its init builds it, on the embedded stores) while the
// event store fails and the document store answers (EventStoreDB down next to MongoDB, or any
// error before a step rewrites its work item): the step fails before it could reschedule its
// item, so the item stays due. It is run again only after a back-off, each failure is reported
// once, and the thread stays responsive: with node:sqlite answering without I/O, retrying at once
// would be a loop of microtasks in which no timer fires (the API and /readyz on that thread).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { Dispatcher } from '../apps/pipeline/dispatcher.ts';
import { sender } from '../apps/processors/sender.ts';
import type { ProcessorDeps } from '../apps/processors/processor.ts';
import { openServices, openStores } from '../apps/runtime.ts';
import { workItems } from '../apps/services/delivery/work-items.ts';
import { emailsOf } from '../apps/services/email-stream.ts';
import { prepareStores } from '../apps/services/prepare-stores.ts';
import { loadConfig } from '../infra/config.ts';
import type { EventStore } from '../infra/ports/event-store.ts';
import { waitUntil } from './support/eventually.ts';

/** The sender's poll (apps/processors/sender.ts POLL_MS): the first back-off of a failed step. */
const POLL_MS = 1000;
/** Reads that fail before the event store answers again: without a back-off, the test still ends. */
const FAILED_READS = 2_000;

const test = suite('sender: a step that fails before it reschedules its item');

test('is run again after a back-off, each failure reported once, while a timer on the thread fires on time', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'relay-sender-failing-step-'));
  const config = loadConfig({ RELAY_DATA_DIR: dir, RELAY_LOG_LEVEL: 'silent' });
  const stores = await openStores(config);
  let dispatcher: Dispatcher | null = null;
  const services = await openServices(config, stores);
  try {
    await prepareStores(stores.documents);
    let reads = 0;
    const down = new Error('event store unavailable');
    const events = new Proxy(stores.events, {
      get(target, name) {
        const value = Reflect.get(target, name, target);
        if (name !== 'readStream') return typeof value === 'function' ? value.bind(target) : value;
        return (...args: unknown[]) => (++reads <= FAILED_READS ? Promise.reject(down) : value.apply(target, args));
      },
    }) as EventStore;
    await workItems(stores.documents).insert({
      _id: 'em_failing', step: 'attempt', attempt: 1, dueAt: new Date(0).toISOString(), streamRevision: 0, origin: { correlationId: 'c', causationId: 'c' }, domain: null,
    });
    const failures: number[] = [];
    const errors: Error[] = [];
    const deps = {
      config, events, documents: stores.documents, log: stores.log, now: () => new Date(),
      services: { ...services, emails: emailsOf(events, services.policies) },
      onError: (error: Error) => {
        failures.push(Date.now());
        errors.push(error);
      },
    } as ProcessorDeps;

    dispatcher = await sender.init!(deps) as Dispatcher;
    let failuresWhenTimerFired: number | null = null;
    setTimeout(() => (failuresWhenTimerFired = failures.length), 10);
    await waitUntil(() => failures.length >= 2, 'the step failed a second time', 5_000);

    assert.ok(failuresWhenTimerFired !== null && failuresWhenTimerFired <= 1, `a 10 ms timer fired after ${failuresWhenTimerFired} failures`);
    assert.ok(failures[1] - failures[0] >= POLL_MS - 2, `run again ${failures[1] - failures[0]} ms after it failed`);
    assert.is(errors.length, reads, 'one report per failed run');
    assert.match(errors[0].message, /^delivery of em_failing \(attempt 1\) failed: event store unavailable$/);
  } finally {
    await dispatcher?.stop();
    await services.close();
    await stores.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test.run();
