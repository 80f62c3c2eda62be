// relay_part_ready{part} (apps/relay-metrics.ts) says on /metrics what /readyz says of each part,
// from the same verdict (apps/liveness.ts). Shown over HTTP: a running Relay's /readyz and
// /metrics, or /metrics alone for a part run on its own:
// - a processor held on one event is not ready on both, while relay_part_up stays 1 (it runs,
//   nothing failed) and the other part stays ready; it is ready again on both once the event
//   goes through. The event's write waits on the document store's commit, held by the test (a
//   commit hold of the embedded stores, on the documents.db of a data directory laid out as
//   older versions made it, so that the log and the event store, in events.db, go on);
// - a processor whose handler never settles on one event says it is stuck: not ready on both,
//   relay_part_up still 1 (run over the processor itself: the test wraps its handler);
// - the parts of a pipeline thread have their series on the main thread's page;
// - a part expected but still starting is not ready on both (PartsLiveness);
// - a retention pass that does not end is stuck, so not ready, past its bound.
import { mkdtempSync, rmSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { PartsLiveness } from '../apps/liveness.ts';
import { startRetention } from '../apps/pipeline/retention.ts';
import { emailProjector } from '../apps/processors/registry.ts';
import { startProcessor, type ProcessorDefinition } from '../apps/processors/processor.ts';
import { startRelay, type RunningRelay } from '../apps/relay.ts';
import { createRelayMetrics, listenForMetrics } from '../apps/relay-metrics.ts';
import { openStores } from '../apps/runtime.ts';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { prepareStores } from '../apps/services/prepare-stores.ts';
import { emailStreamId } from '../domain/email/events.ts';
import { DELIVERY_POLICY } from '../domain/email/delivery.ts';
import { loadConfig } from '../infra/config.ts';
import { Liveness } from '../infra/liveness.ts';
import type { DocumentStore } from '../infra/ports/document-store.ts';
import { startTestApp } from './support/app.ts';
import { commitHoldSwitch } from './support/commit-hold.ts';
import { accepted, toNewEvent } from './support/email-events.ts';
import { deferred, waitUntil } from './support/eventually.ts';
import { samplesOf, scrape, type Sample } from './support/metrics.ts';
import { emailIdOnPartition } from './support/poison-suite.ts';

const test = suite('relay_part_ready: /readyz\'s verdict of each part on /metrics');

interface Readyz { status: string; checks: Record<string, boolean>; parts: Record<string, { state: string; reason: string | null }> }

const readyz = async (url: string) => {
  const response = await fetch(`${url}/readyz`);
  return { code: response.status, body: await response.json() as Readyz };
};

/** The part's one sample of `name` (its series must exist). */
function valueOf(samples: Sample[], name: string, part: string): number {
  const found = samplesOf(samples, name, { part });
  assert.is(found.length, 1, `one ${name} series for part="${part}"`);
  return found[0].value;
}

/** Checks that are not parts: the stores' and the log's pings. */
const STORE_CHECKS = new Set(['eventStore', 'documentStore', 'log']);

test('a processor held on one event: /readyz 503 for it and relay_part_ready 0, while relay_part_up stays 1 and the other part is ready; both back once it returns', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-part-ready-'));
  // The layout of a data directory older versions made: documents.db apart from events.db
  // (apps/runtime.ts, embeddedFiles), so that holding the documents' commits holds no other part.
  const documentsFile = new DatabaseSync(join(dataDir, 'documents.db'));
  documentsFile.exec('PRAGMA journal_mode = WAL');
  documentsFile.close();
  const holds = commitHoldSwitch();
  const release = deferred();
  let relay: RunningRelay | null = null;
  try {
    relay = await startRelay(loadConfig({ RELAY_DATA_DIR: dataDir, PORT: '0', RELAY_LOG_LEVEL: 'silent' }), ['projector', 'suppressor'], {
      commitHold: holds.hold,
      processorPolicy: { stuckAfterMs: 1_500 },
    });
    const url = relay.url!;
    const atStart = await scrape(url);
    for (const part of ['projector', 'suppressor']) assert.is(valueOf(atStart, 'relay_part_ready', part), 1, `${part} ready from its start`);

    // From here on, the document store's commits wait: the projector's write for the email is never durable.
    holds.set(({ file, stage }) => (stage === 'commit' && file?.endsWith('documents.db') ? release.promise : Promise.resolve()));
    const emailId = emailIdOnPartition(4);
    await relay.stores.events.append(emailStreamId(emailId), [toNewEvent(accepted({ emailId }))], { expectedRevision: 'no_stream' });

    let notReady: Readyz | null = null;
    await waitUntil(async () => {
      const answer = await readyz(url);
      if (answer.code === 503 && answer.body.checks.projector === false) notReady = answer.body;
      return notReady !== null;
    }, '/readyz to answer 503 for the projector', 15_000);
    assert.match(notReady!.parts.projector.reason ?? '', /^work waiting and no progress for /);
    assert.is(notReady!.parts.projector.state, 'running');
    assert.is(notReady!.checks.suppressor, true);

    const during = await scrape(url);
    assert.is(valueOf(during, 'relay_part_ready', 'projector'), 0, 'the projector is not ready on /metrics');
    assert.is(valueOf(during, 'relay_part_up', 'projector'), 1, 'it runs: relay_part_up alone does not show it');
    assert.is(valueOf(during, 'relay_part_ready', 'suppressor'), 1, 'the other part is ready');
    // Every part /readyz judges has its series, with the same verdict.
    const { checks } = (await readyz(url)).body;
    for (const [part, ready] of Object.entries(checks)) {
      if (!STORE_CHECKS.has(part)) assert.is(valueOf(during, 'relay_part_ready', part), ready ? 1 : 0, `${part} as /readyz says`);
    }

    // The commit goes through: the projector's round ends and it moves on.
    holds.set(null);
    release.resolve();
    await waitUntil(async () => (await readyz(url)).code === 200, '/readyz to answer 200 again', 15_000);
    assert.ok(await relay.stores.documents.collection(COLLECTIONS.emails).get(emailId), 'the email was projected');
    assert.is(valueOf(await scrape(url), 'relay_part_ready', 'projector'), 1, 'ready again on /metrics');
  } finally {
    holds.set(null);
    release.resolve();
    await relay?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('a processor whose handler never settles on one event is stuck: relay_part_ready 0 with the reason /readyz gives, relay_part_up 1; ready once it returns', async () => {
  const t = await startTestApp();
  const release = deferred();
  const emailId = emailIdOnPartition(2);
  const event = toNewEvent(accepted({ emailId }));
  // The handler hangs on this one event (as in test/parked-events.int.test.ts).
  const running = await startProcessor({
    ...emailProjector,
    handle: async (stored, runtime, deps) => {
      if (stored.id === event.id) await release.promise;
      await emailProjector.handle(stored, runtime as never, deps);
    },
  } as ProcessorDefinition, {
    config: t.config, events: t.stores.events, documents: t.stores.documents, log: t.stores.log, services: t.ctx.services, now: () => new Date(),
    onError: () => {}, onWarning: () => {}, policy: { stuckAfterMs: 300 },
  });
  // A stuck threshold for the other rule (work waiting without progress) far off: only `stuck` can make it not ready here.
  const liveness = new PartsLiveness({ stuckAfterMs: 60_000, expected: ['projector'] });
  for (const [name, tracker] of running.parts) liveness.add(name, tracker);
  const metrics = createRelayMetrics(undefined, { process: false });
  metrics.registry.collect(() => liveness.publish(metrics.parts));
  const server = await listenForMetrics(metrics, '127.0.0.1', 0);
  try {
    await t.stores.events.append(emailStreamId(emailId), [event], { expectedRevision: 'no_stream' });
    let reason: string | null = null;
    await waitUntil(async () => (reason = (await liveness.verdicts()).parts.projector.reason) !== null, 'the projector judged not ready', 10_000);
    assert.match(reason!, /^stuck: held EmailAccepted .* its handler has not returned$/);
    const during = await scrape(server.url);
    assert.is(valueOf(during, 'relay_part_ready', 'projector'), 0);
    assert.is(valueOf(during, 'relay_part_up', 'projector'), 1, 'it runs: relay_part_up alone does not show it');

    release.resolve();
    await waitUntil(async () => (await liveness.verdicts()).ready.projector, 'the projector ready once the handler returned', 10_000);
    assert.is(valueOf(await scrape(server.url), 'relay_part_ready', 'projector'), 1);
  } finally {
    release.resolve();
    await running.stop();
    await server.close();
    await t.close();
  }
});

test('the parts of a pipeline thread have their relay_part_ready on the main thread\'s /metrics, as its /readyz judges them', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-part-ready-thread-'));
  let relay: RunningRelay | null = null;
  try {
    relay = await startRelay(loadConfig({ RELAY_DATA_DIR: dataDir, PORT: '0', RELAY_LOG_LEVEL: 'silent' }), ['projector', 'suppressor'], { pipelineThread: true });
    const url = relay.url!;
    const { code, body } = await readyz(url);
    assert.is(code, 200);
    const samples = await scrape(url);
    for (const part of ['projector', 'suppressor', 'pipeline-thread']) {
      assert.is(body.checks[part], true, `${part} ready on /readyz`);
      assert.is(valueOf(samples, 'relay_part_ready', part), 1, `${part} ready on /metrics`);
    }
  } finally {
    await relay?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('a part the process runs that has not reported yet (it is starting) is not ready on both; once it reports, it is', async () => {
  const liveness = new PartsLiveness({ expected: ['forwarder', 'retention'] });
  liveness.add('forwarder', new Liveness());
  const metrics = createRelayMetrics(undefined, { process: false });
  const server = await listenForMetrics(metrics, '127.0.0.1', 0);
  metrics.registry.collect(() => liveness.publish(metrics.parts));
  try {
    assert.equal((await liveness.verdicts()).ready, { forwarder: true, retention: false });
    let samples = await scrape(server.url);
    assert.is(valueOf(samples, 'relay_part_ready', 'retention'), 0);
    assert.is(samplesOf(samples, 'relay_part_up', { part: 'retention' }).length, 0, 'no liveness of its own yet');
    assert.is(valueOf(samples, 'relay_part_ready', 'forwarder'), 1);

    liveness.add('retention', new Liveness());
    samples = await scrape(server.url);
    assert.is(valueOf(samples, 'relay_part_ready', 'retention'), 1);
  } finally {
    await server.close();
  }
});

test('a retention pass that has not ended past its bound makes retention stuck: not ready on both, relay_part_up still 1; ready again once it ends', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'relay-part-ready-retention-'));
  const stores = await openStores(loadConfig({ RELAY_DATA_DIR: dir, RELAY_LOG_LEVEL: 'silent' }));
  await prepareStores(stores.documents);
  // Passes after the first read expired content keys through a gate: a store call that does not settle.
  const gate = deferred();
  let passes = 0;
  const documents = new Proxy(stores.documents, {
    get(target, prop) {
      const value = Reflect.get(target, prop) as unknown;
      if (prop !== 'collection') return typeof value === 'function' ? value.bind(target) : value;
      return (name: string) => {
        const collection = target.collection(name);
        if (name !== COLLECTIONS.contentKeys) return collection;
        return new Proxy(collection, {
          get(c, p) {
            const member = Reflect.get(c, p) as unknown;
            if (p !== 'find') return typeof member === 'function' ? member.bind(c) : member;
            return async (...args: unknown[]) => {
              if (passes > 1) await gate.promise;
              return (member as (...a: unknown[]) => unknown).apply(c, args);
            };
          },
        });
      };
    },
  }) as DocumentStore;
  const tracker = new Liveness();
  const liveness = new PartsLiveness({ expected: ['retention'] });
  const metrics = createRelayMetrics(undefined, { process: false });
  const server = await listenForMetrics(metrics, '127.0.0.1', 0);
  metrics.registry.collect(() => liveness.publish(metrics.parts));
  const retention = await startRetention({
    documents, events: stores.events, deliveryPolicy: DELIVERY_POLICY, everyMs: 50, stuckAfterMs: 300, liveness: tracker,
    now: () => {
      passes++;
      return new Date();
    },
    onSwept: () => tracker.progress(),
    onError: (error) => tracker.failed(error),
  });
  liveness.add('retention', tracker);
  try {
    assert.is((await liveness.verdicts()).ready.retention, true, 'ready after its first pass');
    let reason: string | null = null;
    await waitUntil(async () => {
      reason = (await liveness.verdicts()).parts.retention.reason;
      return reason !== null;
    }, 'retention to be judged not ready', 5_000);
    assert.match(reason!, /^stuck: a retention pass has run for \d+ s .* and not ended$/);
    const samples = await scrape(server.url);
    assert.is(valueOf(samples, 'relay_part_ready', 'retention'), 0);
    assert.is(valueOf(samples, 'relay_part_up', 'retention'), 1, 'it runs: relay_part_up alone does not show it');

    gate.resolve();
    await waitUntil(async () => (await liveness.verdicts()).ready.retention, 'retention ready once the pass ended', 5_000);
    assert.is(valueOf(await scrape(server.url), 'relay_part_ready', 'retention'), 1);
  } finally {
    gate.resolve();
    await retention.stop();
    await server.close();
    await stores.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test.run();
