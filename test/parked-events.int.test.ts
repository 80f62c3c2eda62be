// The processor runner's side of "no event can stop a consumer group", embedded: a store outage
// parks nothing and shows as stuck; a handler that never returns shows as stuck; an undecodable
// record is parked; records the log passes over are progress; `relay start`'s /readyz; `relay parked` and `relay projections rebuild` as
// operators run them. (Each processor's poison event: test/poison-events.*.int.test.ts.)
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { emailStreamId } from '../domain/email/events.ts';
import { loadConfig } from '../infra/config.ts';
import type { EventStore } from '../infra/ports/event-store.ts';
import { emailProjector } from '../apps/processors/registry.ts';
import { startForwarder } from '../apps/pipeline/forwarder.ts';
import { startProcessor, type ProcessorDefinition, type ProcessorDeps, type RunningProcessor } from '../apps/processors/processor.ts';
import { EVENTS_TOPIC_PARTITIONS, eventsTopic, groupOf } from '../apps/pipeline/topics.ts';
import { startRelay } from '../apps/relay.ts';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { parkedEventId, parkedEventsOf } from '../apps/services/parked-events.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { accepted, toNewEvent } from './support/email-events.ts';
import { deferred, waitUntil } from './support/eventually.ts';
import { processorsCaughtUp } from './support/markers.ts';
import { broken, emailIdOnPartition, partitionOf } from './support/poison-suite.ts';
import { runRelay } from './support/relay-process.ts';

const test = suite<{ dataDir: string; t: TestApp; stops: Array<() => Promise<void>> }>('parked events: outages, stuck processors, readiness, CLI');

test.before.each(async (ctx) => {
  ctx.dataDir = mkdtempSync(join(tmpdir(), 'relay-parked-'));
  ctx.t = await startTestApp({}, { dataDir: ctx.dataDir });
  ctx.stops = [];
  const { events, log, documents } = ctx.t.stores;
  const forwarder = await startForwarder({ events, log, documents, namespace: ctx.t.config.logNamespace });
  ctx.stops.push(() => forwarder.stop());
});

test.after.each(async (ctx) => {
  for (const stop of ctx.stops.reverse()) await stop();
  await ctx.t.close();
  rmSync(ctx.dataDir, { recursive: true, force: true });
});

type Ctx = { t: TestApp; stops: Array<() => Promise<void>> };

/** The projector, with a handler wrapped by the test. */
async function projectorWith(ctx: Ctx, handle: ProcessorDefinition['handle'], deps: Partial<ProcessorDeps> = {}): Promise<RunningProcessor> {
  const { t } = ctx;
  const running = await startProcessor({ ...emailProjector, handle } as ProcessorDefinition, {
    config: t.config, events: t.stores.events, documents: t.stores.documents, log: t.stores.log, services: t.ctx.services, now: () => t.clock.now(),
    onError: () => {},
    ...deps,
  });
  ctx.stops.push(() => running.stop());
  return running;
}

const append = (t: TestApp, emailId: string, event = toNewEvent(accepted({ emailId }))) =>
  t.stores.events.append(emailStreamId(emailId), [event], { expectedRevision: 'no_stream' }).then(() => event);

test('a failure while a store does not answer is not counted: nothing is parked, the processor shows as stuck; once the stores answer, a poison event is parked', async (ctx) => {
  const { t } = ctx;
  let storeUp = false;
  // The event store as the runner sees it: its ping follows storeUp.
  const events = new Proxy(t.stores.events, {
    get(target, prop) {
      if (prop === 'ping') return async () => storeUp;
      const value = Reflect.get(target, prop) as unknown;
      return typeof value === 'function' ? value.bind(target) : value;
    },
  }) as EventStore;
  let failures = 0;
  const warnings: Array<Record<string, unknown>> = [];
  const running = await projectorWith(ctx, async (event) => {
    failures++;
    throw new Error(storeUp ? `cannot apply ${event.id}` : 'connect ECONNREFUSED 127.0.0.1:2113');
  }, { events, policy: { stuckAfterMs: 400 }, onWarning: (message, fields) => warnings.push({ message, ...fields }) });

  const emailId = emailIdOnPartition(3);
  const event = await append(t, emailId);
  await waitUntil(() => failures >= 6, 'six failed attempts during the outage (more than it takes to park)');
  const id = parkedEventId(groupOf(t.config.logNamespace, 'projector'), event.id);
  assert.is(await parkedEventsOf(t.stores.documents).get(id), null, 'nothing parked for an outage');
  await waitUntil(() => running.status().stuck !== null, 'the processor reports itself stuck');
  const stuck = running.status().stuck!;
  assert.match(stuck.reason, /a store does not answer/);
  assert.is(stuck.eventId, event.id);
  assert.is(stuck.attempts, 0, 'no failure was counted');
  await waitUntil(() => warnings.some((w) => /stuck/.test(String(w.message))), 'a stuck warning');

  storeUp = true;
  // The log's back-off grew during the outage (up to 5 s between deliveries).
  await waitUntil(async () => (await parkedEventsOf(t.stores.documents).get(id)) !== null, 'parked once the stores answer', 60_000);
  assert.is((await parkedEventsOf(t.stores.documents).get(id))!.attempts, 5);
  // The parked document is readable once committed; the processor moves on once it is durable.
  await waitUntil(() => running.status().stuck === null, 'the processor is no longer stuck');
});

test('a handler that never returns makes the processor stuck (with a reason) until it does', async (ctx) => {
  const { t } = ctx;
  const release = deferred();
  const hangOn = new Set<string>();
  const warnings: Array<Record<string, unknown>> = [];
  const running = await projectorWith(ctx, async (event, runtime, deps) => {
    if (hangOn.has(event.id)) await release.promise;
    await emailProjector.handle(event, runtime as never, deps);
  }, { policy: { stuckAfterMs: 300 }, onWarning: (message, fields) => warnings.push({ message, ...fields }) });
  const emailId = emailIdOnPartition(5);
  const event = toNewEvent(accepted({ emailId }));
  hangOn.add(event.id);
  await append(t, emailId, event);
  try {
    await waitUntil(() => running.status().stuck !== null, 'stuck');
    assert.match(running.status().stuck!.reason, /handler has not returned/);
    await waitUntil(() => warnings.some((w) => /stuck/.test(String(w.message)) && w.eventId === event.id), 'a stuck warning names the event');
  } finally {
    // Stopping waits for the handler in flight.
    release.resolve();
  }
  await waitUntil(async () => (await t.stores.documents.collection(COLLECTIONS.emails).get(emailId)) !== null, 'projected once it returns');
  // The document is written inside the handler; the record is let go once the handler returns.
  await waitUntil(() => running.status().stuck === null, 'not stuck once the handler returned');
});

test('records the log passes over (types the processor does not want) are its progress, and its lag reaches 0 once idle', async (ctx) => {
  const { t } = ctx;
  let handled = 0;
  const running = await startProcessor({ ...emailProjector, eventTypes: ['NotAppendedHere'], handle: async () => void handled++ } as ProcessorDefinition, {
    config: t.config, events: t.stores.events, documents: t.stores.documents, log: t.stores.log, services: t.ctx.services, now: () => t.clock.now(),
    onError: () => {},
  });
  ctx.stops.push(() => running.stop());
  const liveness = running.parts.get(emailProjector.name)!;
  const before = liveness.snapshot().lastProgressAt;
  await append(t, emailIdOnPartition(3));
  await waitUntil(() => liveness.snapshot().lastProgressAt !== before, 'the record passed over counts as progress');
  await processorsCaughtUp(t, [emailProjector.name]);
  assert.is(handled, 0);
});

test('an undecodable record is parked at once and the records behind it are handled', async (ctx) => {
  const { t } = ctx;
  await projectorWith(ctx, emailProjector.handle as ProcessorDefinition['handle']);
  const key = emailStreamId(emailIdOnPartition(2));
  await t.stores.log.ensureTopic(eventsTopic(t.config.logNamespace), EVENTS_TOPIC_PARTITIONS);
  await t.stores.log.publish(eventsTopic(t.config.logNamespace), [{ key, value: '{not json', headers: { 'event-type': 'EmailAccepted' } }]);
  const next = emailIdOnPartition(partitionOf(key));
  await append(t, next);
  await waitUntil(async () => (await t.stores.documents.collection(COLLECTIONS.emails).get(next)) !== null, 'the next email is projected');
  const [parked] = await parkedEventsOf(t.stores.documents).find({ where: { processor: 'projector' } });
  assert.match(parked.eventId, /^record:/);
  assert.is(parked.streamId, key);
  assert.match(parked.error, /undecodable/);
});

test('`relay start` /readyz: a parked event is counted and leaves the process ready', async (ctx) => {
  // Its own data directory: startRelay opens the stores itself.
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-parked-start-'));
  const relay = await startRelay(loadConfig({ RELAY_DATA_DIR: dataDir, RELAY_LOG_LEVEL: 'silent', PORT: '0', HOST: '127.0.0.1' }), ['forwarder', 'projector']);
  try {
    const bad = broken('EmailAccepted');
    const poisonId = emailIdOnPartition(1);
    await relay.stores.events.append(emailStreamId(poisonId), [bad], { expectedRevision: 'no_stream' });
    const goodId = emailIdOnPartition(1);
    await relay.stores.events.append(emailStreamId(goodId), [toNewEvent(accepted({ emailId: goodId }))], { expectedRevision: 'no_stream' });
    await waitUntil(async () => (await relay.stores.documents.collection(COLLECTIONS.emails).get(goodId)) !== null, 'the email behind it is projected');
    await waitUntil(async () => (await parkedEventsOf(relay.stores.documents).count()) === 1, 'parked');
    const response = await fetch(`${relay.url}/readyz`);
    assert.is(response.status, 200);
    const body = await response.json() as { checks: Record<string, boolean>; parked: unknown };
    assert.is(body.checks.projector, true);
    assert.equal(body.parked, { total: 1, byProcessor: { projector: 1 } });
  } finally {
    await relay.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
  void ctx;
});

test('`relay projections rebuild` reports what it skipped; `relay parked list|retry|dismiss`', async (ctx) => {
  const { t } = ctx;
  const env = { RELAY_DATA_DIR: ctx.dataDir };
  // A projector that cannot apply one event until it is "fixed".
  let fixed = false;
  const fixable = toNewEvent(accepted({ emailId: emailIdOnPartition(4) }));
  await projectorWith(ctx, async (event, runtime, deps) => {
    if (event.id === fixable.id && !fixed) throw new Error('not yet');
    await emailProjector.handle(event, runtime as never, deps);
  });
  const fixableEmail = (fixable.data as { emailId: string }).emailId;
  await t.stores.events.append(emailStreamId(fixableEmail), [fixable], { expectedRevision: 'no_stream' });
  const bad = await append(t, emailIdOnPartition(4), broken('EmailAccepted'));
  const group = groupOf(t.config.logNamespace, 'projector');
  await waitUntil(async () => (await parkedEventsOf(t.stores.documents).count({ processor: 'projector' })) === 2, 'both parked by the projector');

  const rebuilt = await runRelay(['projections', 'rebuild', 'emails', '--json'], env);
  assert.is(rebuilt.code, 0, rebuilt.stderr);
  const result = JSON.parse(rebuilt.stdout);
  assert.is(result.skipped, 1, 'the rebuild skips the poison event and goes on');
  assert.is(result.skippedEvents[0].eventId, bad.id);
  assert.is(result.swapped, true);
  const text = await runRelay(['projections', 'rebuild', 'emails'], env);
  assert.is(text.code, 0, text.stderr);
  assert.match(text.stdout, /1 event could not be applied and were skipped/);
  assert.match(text.stderr, new RegExp(`skipped EmailAccepted email-em_\\w+@0 \\(event ${bad.id}\\)`));

  const listed = await runRelay(['parked', 'list', '--json'], env);
  assert.is(listed.code, 0, listed.stderr);
  const parked = JSON.parse(listed.stdout).parked as Array<{ _id: string; processor: string }>;
  assert.equal(parked.map((p) => p.processor).sort(), ['projector', 'projector', 'rebuild:emails']);
  const onlyRebuild = await runRelay(['parked', 'list', '--processor', 'rebuild:emails'], env);
  assert.is(onlyRebuild.stdout.trim().split('\n').length, 1);
  assert.match(onlyRebuild.stdout, new RegExp(`^rebuild\\.emails:${bad.id}  rebuild:emails  EmailAccepted`));

  // The rebuild's parked event is applied here: it still fails.
  const again = await runRelay(['parked', 'retry', `rebuild.emails:${bad.id}`], env);
  assert.is(again.code, 1, again.stdout + again.stderr);
  assert.match(again.stderr, /failed again/);
  // The projector's: handed back to its group, which (fixed now) applies it.
  fixed = true;
  const retried = await runRelay(['parked', 'retry', parkedEventId(group, fixable.id), '--json'], env);
  assert.is(retried.code, 0, retried.stdout + retried.stderr);
  assert.equal(JSON.parse(retried.stdout), { id: parkedEventId(group, fixable.id), outcome: 'applied' });
  assert.ok(await t.stores.documents.collection(COLLECTIONS.emails).get(fixableEmail), 'projected by the retry');
  const stillBad = await runRelay(['parked', 'retry', parkedEventId(group, bad.id), '--wait', '20'], env);
  assert.is(stillBad.code, 1, stillBad.stdout + stillBad.stderr);
  assert.ok((await parkedEventsOf(t.stores.documents).get(parkedEventId(group, bad.id)))!.attempts >= 6, 'its attempts add up');

  const dismissed = await runRelay(['parked', 'dismiss', parkedEventId(group, bad.id)], env);
  assert.is(dismissed.code, 0, dismissed.stderr);
  assert.is(await parkedEventsOf(t.stores.documents).get(parkedEventId(group, bad.id)), null);
  const usage = await runRelay(['parked', 'retry'], env);
  assert.is(usage.code, 2);
  assert.match(usage.stderr, /usage: relay parked list/);
});

test.run();
