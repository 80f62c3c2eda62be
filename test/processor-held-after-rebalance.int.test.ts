// A processor that lost partitions in a rebalance while it was retrying their records does not
// report work waiting for them: the other member handles them, and once every record is handled
// and the group has no lag, the instance that lost them has nothing to do. It forgets the
// records it held on partitions that moved away (apps/processors/processor.ts, onMembership), so
// its liveness says no work waits and /readyz (apps/liveness.ts) does not turn 503 a minute later
// with nothing changed, as it did around every rolling deploy. On Kafka (a rebalance between two
// members of one group).
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as assert from 'uvu/assert';
import { judge } from '../apps/liveness.ts';
import { startProcessor, type ProcessorDefinition, type ProcessorDeps, type RunningProcessor } from '../apps/processors/processor.ts';
import { EVENTS_TOPIC_PARTITIONS, encodeEvent, eventsTopic } from '../apps/pipeline/topics.ts';
import { eventRecordHeaders } from '../infra/events-topic.ts';
import { KafkaLog } from '../infra/kafka/log.ts';
import type { StoredEvent } from '../infra/ports/event-store.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';
import { partitionForKey } from '../infra/sqlite/partitioner.ts';
import { waitUntil } from './support/eventually.ts';
import { skippableSuite } from './support/skippable-suite.ts';

const brokers = process.env.RELAY_KAFKA_BROKERS?.split(',').map((b) => b.trim()).filter(Boolean) ?? [];
const test = skippableSuite('a processor after a rebalance took partitions it was retrying', brokers.length > 0 ? undefined : 'RELAY_KAFKA_BROKERS not set');

const streamOn = (partition: number, tag: string): string => {
  for (let i = 0; ; i++) if (partitionForKey(`${tag}-${i}`, EVENTS_TOPIC_PARTITIONS) === partition) return `${tag}-${i}`;
};

test('once every record is handled and the group has no lag, the instance that lost the partition reports no work waiting', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'relay-held-rebalance-'));
  const documents = new SqliteDocumentStore(join(dir, 'documents.db'));
  const log = await KafkaLog.connect(brokers, { logLevel: 'nothing', sessionTimeoutMs: 6_000, heartbeatIntervalMs: 300, maxWaitTimeMs: 100, maxRetryDelayMs: 300 });
  const namespace = `held_${randomUUID().slice(0, 8)}`;
  const topic = eventsTopic(namespace);
  const running: RunningProcessor[] = [];
  try {
    await log.ensureTopic(topic, EVENTS_TOPIC_PARTITIONS);
    // One record on every partition: once a second member joins, some of them leave instance A.
    const events: StoredEvent[] = Array.from({ length: EVENTS_TOPIC_PARTITIONS }, (_, p) => p).map((p, i) => ({
      id: randomUUID(), streamId: streamOn(p, 'thing'), revision: 0, position: String(i + 1), type: 'Thing', data: {}, metadata: {}, recordedAt: new Date().toISOString(),
    } as unknown as StoredEvent));
    const handledBy = new Map<string, string>();
    let aFails = true;
    let failuresInA = 0;
    const definition = (instance: string): ProcessorDefinition => ({
      name: 'held', summary: 'a processor whose instance A fails until told otherwise', eventTypes: ['Thing'],
      handle: async (event) => {
        if (instance === 'A' && aFails) {
          failuresInA++;
          throw new Error('transient failure in A');
        }
        handledBy.set(event.id, instance);
      },
    });
    const deps = {
      config: { logNamespace: namespace }, events: { ping: async () => true }, documents, log, services: {}, now: () => new Date(), onError: () => {},
      policy: { attempts: 1_000, stuckAfterMs: 60_000 },
    } as unknown as ProcessorDeps;

    const a = await startProcessor(definition('A'), deps);
    running.push(a);
    await log.publish(topic, events.map((e) => ({ key: e.streamId, value: encodeEvent(e), headers: eventRecordHeaders(e.type, e.id) })));
    // A holds every record, retrying them; then B joins and takes some partitions over.
    await waitUntil(() => failuresInA >= 2 * EVENTS_TOPIC_PARTITIONS, 'A to be retrying every record', 10_000);
    const b = await startProcessor(definition('B'), deps);
    running.push(b);
    await waitUntil(() => [...handledBy.values()].includes('B'), 'B to handle a record of a partition it took over', 20_000);
    aFails = false;
    await waitUntil(() => handledBy.size === EVENTS_TOPIC_PARTITIONS, 'every record to be handled', 20_000);
    await waitUntil(async () => (await log.groupOffsets(topic, [`${namespace}.held`])).every((o) => o.committed !== null ? o.committed === o.end : o.end === '0'), 'the group to have no lag', 10_000);

    const status = await a.parts.get('held')!.status();
    const verdict = judge(status, Date.now() + 60_000, 60_000);
    assert.is(status.workWaiting, false, `A has nothing to do but says work waits (judged a minute from now, with nothing changed: ${verdict.reason})`);
    assert.ok(verdict.ready, String(verdict.reason));
  } finally {
    for (const r of running.reverse()) await r.stop().catch(() => {});
    await log.close();
    await documents.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test.run();
