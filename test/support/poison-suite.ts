// No event can stop a consumer group: for every processor in the registry, an event its real
// handler throws on (crafted data, appended straight to the event store) is retried, parked,
// and the events behind it in the same partition are handled; /readyz counts it. A rebuild
// skips and reports such an event. Run embedded and on Kafka + a MongoDB-wire store.
import { randomBytes, randomUUID } from 'node:crypto';
import * as assert from 'uvu/assert';
import { emailStreamId } from '../../domain/email/events.ts';
import type { NewEvent } from '../../infra/ports/event-store.ts';
import { partitionForKey } from '../../infra/sqlite/partitioner.ts';
import { startForwarder } from '../../apps/pipeline/forwarder.ts';
import { startProcessor, type ProcessorDefinition, type ProcessorPolicy, type RunningProcessor } from '../../apps/processors/processor.ts';
import { PROCESSORS } from '../../apps/processors/registry.ts';
import { EVENTS_TOPIC_PARTITIONS, groupOf } from '../../apps/pipeline/topics.ts';
import { COLLECTIONS } from '../../apps/services/collections.ts';
import { suppressionsOf } from '../../apps/services/management/suppressions.ts';
import { parkedEventId, parkedEventsOf } from '../../apps/services/parked-events.ts';
import { PROJECTIONS } from '../../apps/services/projection-registry.ts';
import { rebuildProjection } from '../../apps/services/rebuild.ts';
import { startTestApp, type TestApp } from './app.ts';
import { accepted, attempted, outcome, toNewEvent } from './email-events.ts';
import { waitUntil } from './eventually.ts';
import { processorsCaughtUp } from './markers.ts';
import { skippableSuite } from './skippable-suite.ts';

export const partitionOf = (streamId: string): number => partitionForKey(streamId, EVENTS_TOPIC_PARTITIONS);

/** A fresh email id whose stream lands in `partition` of the events topic. */
export function emailIdOnPartition(partition: number): string {
  for (;;) {
    const id = `em_${randomBytes(6).toString('hex')}`;
    if (partitionOf(emailStreamId(id)) === partition) return id;
  }
}

/** An event as only a broken writer would append it: the data every handler reads is missing. */
export const broken = (type: string, data: Record<string, unknown> = {}): NewEvent => ({
  id: randomUUID(), type, data, metadata: { correlationId: 'poison', causationId: 'poison', schemaVersion: 1 },
});

/**
 * For each processor: the poison stream's events (the last one is the one its handler throws
 * on) and, for a healthy email, events its handler applies, with a check of their effect.
 */
export const POISON: Record<string, {
  poison: () => NewEvent[];
  good: (emailId: string) => NewEvent[];
  applied?: (t: TestApp, emailId: string) => Promise<boolean>;
}> = {
  // EmailAccepted without recipients: the read model cannot be built from it.
  projector: {
    poison: () => [broken('EmailAccepted')],
    good: (emailId) => [toNewEvent(accepted({ emailId }))],
    applied: async (t, emailId) => (await t.stores.documents.collection(COLLECTIONS.emails).get(emailId)) !== null,
  },
  // The same for the deliverability read model.
  deliverability: {
    poison: () => [broken('EmailAccepted')],
    good: (emailId) => [toNewEvent(accepted({ emailId }))],
    applied: async (t, emailId) => (await t.stores.documents.collection(COLLECTIONS.deliverability).get(emailId)) !== null,
  },
  // The work item is derived from a stream whose admission cannot be folded.
  sender: {
    poison: () => [broken('EmailAccepted')],
    good: (emailId) => [toNewEvent(accepted({ emailId }))],
  },
  // A hard bounce of an email whose admission cannot be folded: whom to block is unknown.
  suppressor: {
    poison: () => [broken('EmailAccepted'), broken('DeliveryAttempted', { attempt: 1, recipients: [{ index: 0, address: 'x@example.test', status: 'hard_bounced' }] })],
    good: (emailId) => [toNewEvent(accepted({ emailId, workspaceId: `ws_${emailId}` })), toNewEvent(attempted([outcome(0, 'hard_bounced')]))],
    applied: async (t, emailId) => (await suppressionsOf(t.stores.documents).count({ workspaceId: `ws_${emailId}` })) === 1,
  },
  // The webhook payload needs the email's state, which cannot be folded.
  webhooks: {
    poison: () => [broken('EmailAccepted'), broken('DeliveryAttempted')],
    good: (emailId) => [toNewEvent(accepted({ emailId })), toNewEvent(attempted([outcome(0, 'sent')]))],
  },
};

interface Context {
  t: TestApp;
  stops: Array<() => Promise<void>>;
}

export function poisonSuite(mode: string, storesEnv: () => Record<string, string>, skipReason?: string): void {
  const test = skippableSuite<Context>(`a poison event is parked, its partition moves on [${mode}]`, skipReason);
  const timeoutMs = 90_000;

  test.before.each(async (ctx) => {
    ctx.t = await startTestApp(storesEnv());
    ctx.stops = [];
    const { events, log, documents } = ctx.t.stores;
    const forwarder = await startForwarder({ events, log, documents, namespace: ctx.t.config.logNamespace });
    ctx.stops.push(() => forwarder.stop());
  });

  test.after.each(async (ctx) => {
    for (const stop of ctx.stops.reverse()) await stop();
    await ctx.t.close();
  });

  async function run(ctx: Context, definition: ProcessorDefinition, handled: Set<string>, warnings: Array<Record<string, unknown>>, policy: Partial<ProcessorPolicy> = {}): Promise<RunningProcessor> {
    // The real definition; the wrapper only notes which events its handler finished.
    const spy: ProcessorDefinition = {
      ...definition,
      handle: async (event, runtime, deps) => {
        await definition.handle(event, runtime, deps);
        handled.add(event.id);
      },
    };
    const { t } = ctx;
    const running = await startProcessor(spy, {
      config: t.config, events: t.stores.events, documents: t.stores.documents, log: t.stores.log, services: t.ctx.services, now: () => t.clock.now(),
      onError: () => {},
      onWarning: (message, fields) => warnings.push({ message, ...fields }),
      policy,
    });
    ctx.stops.push(() => running.stop());
    return running;
  }

  for (const definition of PROCESSORS) {
    test(`${definition.name}: an event its handler throws on is parked after its retries; the next events of its partition are handled; /readyz counts it`, async (ctx) => {
      const { t } = ctx;
      const plan = POISON[definition.name];
      assert.ok(plan, `a poison event for ${definition.name}`);
      const handled = new Set<string>();
      const warnings: Array<Record<string, unknown>> = [];
      const running = await run(ctx, definition, handled, warnings);

      const poisonId = emailIdOnPartition(Math.floor(Math.random() * EVENTS_TOPIC_PARTITIONS));
      const partition = partitionOf(emailStreamId(poisonId));
      const poison = plan.poison();
      await t.stores.events.append(emailStreamId(poisonId), poison, { expectedRevision: 'no_stream' });
      const bad = poison[poison.length - 1];
      // Behind it in the same partition: two healthy emails.
      const goodIds = [emailIdOnPartition(partition), emailIdOnPartition(partition)];
      const goodEvents: string[] = [];
      for (const id of goodIds) {
        const events = plan.good(id);
        await t.stores.events.append(emailStreamId(id), events, { expectedRevision: 'no_stream' });
        goodEvents.push(...events.filter((e) => definition.eventTypes.includes(e.type)).map((e) => e.id));
      }

      await waitUntil(() => goodEvents.every((id) => handled.has(id)), `${definition.name} handled the events behind the poison one`, timeoutMs);
      // What a round wrote is read once the group's offset is past it: a log commits offsets
      // only after the round's writes are durable, and the handlers may return before.
      await processorsCaughtUp(t, [definition.name], timeoutMs);
      if (plan.applied) for (const id of goodIds) assert.ok(await plan.applied(t, id), `${definition.name} applied ${id}`);
      assert.not.ok(handled.has(bad.id), 'the poison event was never applied');

      const group = groupOf(t.config.logNamespace, definition.name);
      const parked = await parkedEventsOf(t.stores.documents).get(parkedEventId(group, bad.id));
      assert.ok(parked, 'the poison event is parked');
      assert.is(parked!.processor, definition.name);
      assert.is(parked!.group, group);
      assert.is(parked!.eventId, bad.id);
      assert.is(parked!.streamId, emailStreamId(poisonId));
      assert.is(parked!.revision, poison.length - 1);
      assert.is(parked!.type, bad.type);
      assert.is(parked!.attempts, 5, 'five attempts while the stores answered');
      assert.is(parked!.partition, partition);
      assert.ok(parked!.error.length > 0);
      assert.ok(parked!.firstFailedAt <= parked!.lastFailedAt);
      assert.is(await parkedEventsOf(t.stores.documents).count({ processor: definition.name }), 1, 'only the poison event is parked');
      assert.ok(warnings.some((w) => w.eventId === bad.id && /parked/.test(String(w.message))), 'a warning names it');
      assert.equal(running.status().stuck, null);
      assert.is(running.status().parked, 1);

      const ready = await t.app.inject({ method: 'GET', url: '/readyz' });
      assert.is(ready.statusCode, 200, 'a parked event does not take the process out of rotation');
      assert.equal(ready.json().parked, { total: 1, byProcessor: { [definition.name]: 1 } });
    });
  }

  test('rebuild: an event the projection cannot apply is skipped, reported and parked; the others are rebuilt', async (ctx) => {
    const { t } = ctx;
    const poisonId = emailIdOnPartition(0);
    const bad = broken('EmailAccepted');
    await t.stores.events.append(emailStreamId(poisonId), [bad], { expectedRevision: 'no_stream' });
    const goodIds = [emailIdOnPartition(0), emailIdOnPartition(1)];
    for (const id of goodIds) await t.stores.events.append(emailStreamId(id), [toNewEvent(accepted({ emailId: id }))], { expectedRevision: 'no_stream' });

    const result = await rebuildProjection(t.stores.documents, t.stores.events, PROJECTIONS.emails, { name: 'emails' });
    assert.is(result.swapped, true);
    assert.is(result.events, 3);
    assert.is(result.skipped, 1);
    assert.is(result.documents, 2);
    assert.is(result.skippedEvents.length, 1);
    assert.is(result.skippedEvents[0].eventId, bad.id);
    assert.is(result.skippedEvents[0].parkedId, parkedEventId('rebuild.emails', bad.id));
    const parked = await parkedEventsOf(t.stores.documents).get(parkedEventId('rebuild.emails', bad.id));
    assert.is(parked?.processor, 'rebuild:emails');
    assert.is(parked?.streamId, emailStreamId(poisonId));
    for (const id of goodIds) assert.ok(await t.stores.documents.collection(COLLECTIONS.emails).get(id), `${id} rebuilt`);
    const ready = await t.app.inject({ method: 'GET', url: '/readyz' });
    assert.equal(ready.json().parked, { total: 1, byProcessor: { 'rebuild:emails': 1 } });
  });

  test.run();
}
