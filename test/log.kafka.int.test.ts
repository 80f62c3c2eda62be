// The Kafka log on a real broker (RELAY_KAFKA_BROKERS, e.g. from infra/engines/engines.sh up):
// the shared contract, plus what depends on the broker's group coordination (members in two
// clients, a SIGKILLed member, hand-over while a handler runs, handlers slower than the session,
// a member kafkajs gives up on), and the topics it creates (every record kept) or finds (kept as
// they are, what differs warned of).
import { randomUUID } from 'node:crypto';
import { Kafka, logLevel, type ConfigResourceTypes } from 'kafkajs';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { LogRecord } from '../infra/ports/log.ts';
import { KafkaLog } from '../infra/kafka/log.ts';
import type { KafkaLogLine, KafkaLogOptions } from '../infra/kafka/log.ts';
import { TOPIC_MAX_MESSAGE_BYTES } from '../infra/kafka/topic-config.ts';
import { partitionForKey } from '../infra/sqlite/partitioner.ts';
import { keysByPartition } from './support/log-keys.ts';
import { logContract } from './contracts/log.contract.ts';
import { deferred, settle, waitUntil } from './support/eventually.ts';
import { startFixture } from './support/fixture-process.ts';
import { FIND_COORDINATOR, requestGate } from './support/kafka-request-gate.ts';

const brokers = process.env.RELAY_KAFKA_BROKERS?.split(',').map((b) => b.trim()).filter(Boolean) ?? [];
const WAIT_MS = 40_000;

function unique(prefix: string): string {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}


const processWarnings: Error[] = [];

/** What this process writes to stderr from now on (still written), until restore(). */
function captureStderr(): { lines: string[]; restore: () => void } {
  const lines: string[] = [];
  const write = process.stderr.write;
  process.stderr.write = function (this: typeof process.stderr, chunk: unknown, ...rest: unknown[]) {
    lines.push(String(chunk));
    return (write as (...args: unknown[]) => boolean).call(this, chunk, ...rest);
  } as typeof process.stderr.write;
  return { lines, restore: () => void (process.stderr.write = write) };
}

function firstSeen(values: string[]): string[] {
  return [...new Set(values)];
}

if (brokers.length === 0) {
  const skipped = suite('kafka log');
  console.log('skipped: RELAY_KAFKA_BROKERS not set (start a broker with: eval "$(bash infra/engines/engines.sh up)")');
  skipped.skip('log contract: kafka', () => {});
  skipped.skip('kafka-specific group behaviour', () => {});
  skipped.run();
} else {
  // Warnings of this whole file's Kafka clients (checked by the last test).
  process.on('warning', (warning) => void processWarnings.push(warning));
  logContract('kafka', async () => {
    const log = await KafkaLog.connect(brokers);
    return { log, close: () => log.close() };
  }, { noReadFailures: 'the shared broker is never stopped; test/liveness-kafka.e2e.test.ts halts a broker of its own' });
  kafkaSuite();
}

function kafkaSuite(): void {
  const test = suite('kafka log');
  const open = (options?: KafkaLogOptions) => KafkaLog.connect(brokers, options);

  test('keys land in the partition of the murmur2 partitioner (as in the sqlite log)', async () => {
    const log = await open();
    try {
      const topic = unique('kafka-keys');
      await log.ensureTopic(topic, 5);
      const keys = Array.from({ length: 30 }, (_, i) => `customer-${i}`);
      await log.publish(topic, keys.map((key) => ({ key, value: key })));
      const seen: LogRecord[] = [];
      const consumer = await log.consume({ group: unique('g'), topic, handle: async (r) => void seen.push(r) });
      await waitUntil(() => seen.length >= keys.length, 'every record arrives', WAIT_MS);
      await consumer.stop();
      for (const record of seen) assert.is(record.partition, partitionForKey(record.key, 5), record.key);
    } finally {
      await log.close();
    }
  });

  test('members in two clients split the partitions; when one stops the other takes over without loss', async () => {
    const [logA, logB, publisher] = await Promise.all([open(), open(), open()]);
    try {
      const topic = unique('kafka-shared');
      const group = unique('g');
      await publisher.ensureTopic(topic, 4);
      const keys = keysByPartition(4);
      const journal: Array<{ member: string; record: LogRecord }> = [];
      const handler = (member: string) => async (record: LogRecord) => void journal.push({ member, record });
      const a = await logA.consume({ group, topic, handle: handler('a') });
      // Resolves once the group rebalanced with both members.
      const b = await logB.consume({ group, topic, handle: handler('b') });

      const before = Array.from({ length: 40 }, (_, i) => ({ key: keys[i % 4], value: `before-${i}` }));
      await publisher.publish(topic, before);
      await waitUntil(() => before.every((r) => journal.some((j) => j.record.value === r.value)), 'both members handle the first records', WAIT_MS);
      const partitionsOf = (member: string) => new Set(journal.filter((j) => j.member === member).map((j) => j.record.partition));
      assert.is(partitionsOf('a').size, 2, 'a has two partitions');
      assert.is(partitionsOf('b').size, 2, 'b has two partitions');
      assert.ok([...partitionsOf('a')].every((p) => !partitionsOf('b').has(p)), 'no partition is shared');
      for (const r of before) assert.is(journal.filter((j) => j.record.value === r.value).length, 1, `${r.value} handled once`);

      // Keep publishing while b leaves, so records are in flight during the hand-over.
      const published: Array<{ key: string; value: string }> = [];
      let publishing = true;
      const publishLoop = (async () => {
        for (let round = 0; publishing; round++) {
          const batch = keys.map((key) => ({ key, value: `${key}:${round}` }));
          await publisher.publish(topic, batch);
          published.push(...batch);
          await settle(20);
        }
      })();
      await waitUntil(() => published.length >= 40, 'records are being published', WAIT_MS);
      await b.stop();
      const stoppedAt = journal.length;
      await waitUntil(() => journal.slice(stoppedAt).some((j) => j.member === 'a' && partitionsOf('b').has(j.record.partition)), 'a took over b’s partitions', WAIT_MS);
      publishing = false;
      await publishLoop;
      const handled = () => new Set(journal.map((j) => j.record.value));
      await waitUntil(() => published.every((r) => handled().has(r.value)), 'every published record is handled', WAIT_MS);
      await a.stop();

      assert.ok(journal.slice(stoppedAt).every((j) => j.member === 'a'), 'nothing is handled by b after its stop() resolved');
      for (const key of keys) {
        const order = firstSeen(journal.filter((j) => j.record.key === key && j.record.value.includes(':')).map((j) => j.record.value));
        assert.equal(order, published.filter((r) => r.key === key).map((r) => r.value), `${key} in publish order`);
      }
      // b committed every record it handled before leaving, so a repeats none of them.
      for (const value of handled()) assert.is(journal.filter((j) => j.record.value === value).length, 1, `${value} handled once`);
    } finally {
      await Promise.all([logA.close(), logB.close(), publisher.close()]);
    }
  });

  test('a member SIGKILLed mid-handler: after its session expires a new member gets the unhandled record again', async () => {
    const log = await open();
    const topic = unique('kafka-killed');
    const group = unique('g');
    await log.ensureTopic(topic, 1);
    const child = startFixture(new URL('./fixtures/log-consumer.ts', import.meta.url), ['kafka', brokers.join(','), topic, group, '6000']);
    try {
      await child.waitForLine((l) => l.includes('"ready"'), 'the child consumer joined', WAIT_MS);
      await log.publish(topic, [
        { key: 'k', value: 'first' },
        { key: 'k', value: 'hang-second' },
        { key: 'k', value: 'third' },
      ]);
      await child.waitForLine((l) => l.includes('"handling"') && l.includes('hang-second'), 'the child is inside the handler', WAIT_MS);
      child.child.kill('SIGKILL');
      assert.equal((await child.exited).signal, 'SIGKILL');
      const handledThere = child.lines.map((l) => JSON.parse(l) as { event: string; value?: string }).filter((p) => p.event === 'handled');
      assert.equal(handledThere.map((p) => p.value), ['first']);

      const seen: LogRecord[] = [];
      const consumer = await log.consume({ group, topic, handle: async (r) => void seen.push(r) });
      await waitUntil(() => seen.length >= 2, 'the dead member’s partition is reassigned', WAIT_MS);
      await settle(300);
      await consumer.stop();
      assert.equal(seen.map((r) => [r.value, r.offset]), [['hang-second', '1'], ['third', '2']], 'the uncommitted record comes again, the committed one does not');
    } finally {
      child.child.kill('SIGKILL');
      await child.exited;
      await log.close();
    }
  });

  test('a joining member gets a partition only after the owner’s in-flight handler finished and committed', async () => {
    const [logA, logB] = await Promise.all([open(), open()]);
    try {
      const topic = unique('kafka-handover');
      const group = unique('g');
      await logA.ensureTopic(topic, 2);
      const [k0, k1] = keysByPartition(2);
      const journal: string[] = [];
      const release = deferred();
      const one = await logA.consume({
        group,
        topic,
        handle: async (r) => {
          journal.push(`one:${r.value}`);
          if (r.value === 'block') await release.promise;
        },
      });
      await logA.publish(topic, [{ key: k0, value: 'block' }]);
      await waitUntil(() => journal.includes('one:block'), 'the first member is inside its handler', WAIT_MS);
      // The rebalance this join starts waits for the busy member to rejoin.
      const joining = logB.consume({ group, topic, handle: async (r) => void journal.push(`two:${r.value}`) });
      await logA.publish(topic, [
        { key: k0, value: 'a1' },
        { key: k1, value: 'b1' },
        { key: k0, value: 'a2' },
        { key: k1, value: 'b2' },
      ]);
      await settle(2500);
      assert.equal(journal, ['one:block'], 'nothing moves while the owner is busy');
      journal.push('released');
      release.resolve();
      const two = await joining;
      await waitUntil(() => journal.length >= 6, 'every record is handled', WAIT_MS);
      await settle(300);
      await Promise.all([one.stop(), two.stop()]);

      const handled = journal.filter((j) => j !== 'released').map((j) => j.split(':')[1]);
      assert.equal(handled.sort(), ['a1', 'a2', 'b1', 'b2', 'block'], `each record once: ${journal.join(' ')}`);
      assert.ok(journal.some((j) => j.startsWith('two:')), `the joining member got a partition: ${journal.join(' ')}`);
      for (const [x, y] of [['a1', 'a2'], ['b1', 'b2']]) {
        assert.ok(journal.findIndex((j) => j.endsWith(`:${x}`)) < journal.findIndex((j) => j.endsWith(`:${y}`)), `${x} before ${y}`);
      }
    } finally {
      await Promise.all([logA.close(), logB.close()]);
    }
  });

  test('a handler slower than the session timeout keeps its partition: the record is handled once', async () => {
    const log = await open({ sessionTimeoutMs: 6000, heartbeatIntervalMs: 1000 });
    try {
      const topic = unique('kafka-slow');
      await log.ensureTopic(topic, 1);
      await log.publish(topic, [{ key: 'k', value: 'slow' }, { key: 'k', value: 'after' }]);
      const calls: string[] = [];
      const consumer = await log.consume({
        group: unique('g'),
        topic,
        handle: async (r) => {
          calls.push(r.value);
          if (r.value === 'slow') await settle(8000);
        },
      });
      await waitUntil(() => calls.includes('after'), 'the record after the slow one arrives', WAIT_MS);
      await settle(300);
      await consumer.stop();
      assert.equal(calls, ['slow', 'after']);
    } finally {
      await log.close();
    }
  });

  test('unknown topics and bad records are refused; close() waits for a running handler and ping then fails', async () => {
    const log = await open();
    const missing = unique('missing');
    for (const attempt of [
      () => log.publish(missing, [{ key: 'k', value: 'v' }]),
      () => log.consume({ group: 'g', topic: missing, handle: async () => {} }),
      () => log.ensureTopic(unique('bad'), 0),
    ]) {
      try {
        await attempt();
        assert.unreachable('must be refused');
      } catch (error) {
        assert.not.match(String(error), /must be refused/);
      }
    }
    const topic = unique('kafka-errors');
    await log.ensureTopic(topic, 1);
    try {
      await log.publish(topic, [{ key: 'k', value: 1 as unknown as string }]);
      assert.unreachable('a non-string value must be refused');
    } catch (error) {
      assert.instance(error, TypeError);
    }

    await log.publish(topic, [{ key: 'k', value: 'slow' }]);
    const release = deferred();
    const handling = deferred();
    const handled: string[] = [];
    await log.consume({
      group: unique('g'),
      topic,
      handle: async (r) => {
        handling.resolve();
        await release.promise;
        handled.push(r.value);
      },
    });
    await handling.promise;
    let closed = false;
    const closing = log.close().then(() => {
      closed = true;
    });
    await settle(200);
    assert.is(closed, false, 'close() waits for the running handler');
    release.resolve();
    await closing;
    assert.equal(handled, ['slow']);
    assert.is(await log.ping(), false);
  });

  test('a consumer kafkajs gives up on (no coordinator found while it rejoins) restarts with a back-off and handles what is published afterwards', async () => {
    const gate = requestGate(FIND_COORDINATOR);
    const stderr = captureStderr();
    const [logA, logB, publisher] = await Promise.all([open({ socketFactory: gate.socketFactory, sessionTimeoutMs: 6000 }), open(), open()]);
    try {
      const topic = unique('kafka-restart');
      const group = unique('g');
      await publisher.ensureTopic(topic, 2);
      const keys = keysByPartition(2);
      const handledByA: string[] = [];
      const states: Array<{ state: string; error?: string }> = [];
      const a = await logA.consume({
        group,
        topic,
        handle: async (r) => void handledByA.push(r.value),
        onState: (state, error) => void states.push({ state, error: error?.message }),
      });
      await publisher.publish(topic, keys.map((key, i) => ({ key, value: `before-${i}` })));
      await waitUntil(() => handledByA.length === 2, 'a handles the first records', WAIT_MS);
      const restarts = () => stderr.lines.filter((l) => l.startsWith(`[kafka-log] WARN consumer of group ${group} `));

      // A second member makes the group rebalance: rejoining, a asks for its coordinator again,
      // the connection closes mid-request, and kafkajs gives up on a for good (restart: false).
      gate.mode = 'cut';
      const b = await logB.consume({ group, topic, handle: async () => {} });
      await waitUntil(() => states.length > 0, 'a says it is recovering', WAIT_MS);
      assert.is(states[0].state, 'recovering');
      assert.match(states[0].error ?? '', /Failed to find group coordinator/);
      // Each restart fails the same way while the coordinator cannot be found, and schedules the next.
      await waitUntil(() => gate.cut >= 3, 'a was restarted twice, in vain', WAIT_MS);
      // A restart that cannot even connect schedules the next one too.
      gate.mode = 'refuse';
      await waitUntil(() => restarts().some((l) => l.includes('could not be restarted')), 'a restart fails to connect', WAIT_MS);
      await b.stop();
      gate.mode = 'pass';
      await waitUntil(() => states.at(-1)?.state === 'running', 'a runs again', WAIT_MS);
      await publisher.publish(topic, keys.map((key, i) => ({ key, value: `after-${i}` })));
      await waitUntil(() => handledByA.includes('after-0') && handledByA.includes('after-1'), 'a handles the records published after it came back', WAIT_MS);
      assert.equal(states.map((s) => s.state), ['recovering', 'running']);
      assert.equal(handledByA.filter((v) => v.startsWith('after-')).sort(), ['after-0', 'after-1'], 'each once');
      const delays = restarts().map((l) => Number(/restarting it in (\d+) ms/.exec(l)?.[1]));
      assert.equal(delays.slice(0, 3), [100, 200, 400], 'from the retry delay, doubling');
      assert.match(restarts()[0], /crashed on an error kafkajs does not retry \(.*Failed to find group coordinator\)/);

      // Running again reset the back-off: the next time kafkajs gives up, a restarts after the retry delay.
      const before = restarts().length;
      gate.mode = 'cut';
      const joining = logB.consume({ group, topic, handle: async () => {} });
      await waitUntil(() => restarts().length > before, 'kafkajs gives up on a again', WAIT_MS);
      assert.match(restarts()[before], /restarting it in 100 ms/);
      gate.mode = 'pass';
      await (await joining).stop();
      await a.stop();
    } finally {
      stderr.restore();
      await Promise.all([logA.close(), logB.close(), publisher.close()]);
    }
  });

  test('stop() while such a restart is pending: the consumer stays stopped and opens no connection again', async () => {
    const gate = requestGate(FIND_COORDINATOR);
    const [logA, logB] = await Promise.all([open({ socketFactory: gate.socketFactory, retryDelayMs: 1000 }), open()]);
    try {
      const topic = unique('kafka-restart-pending');
      const group = unique('g');
      await logB.ensureTopic(topic, 1);
      // The consumer's connections: those a's client opens after its producer's and admin's.
      const consumerSockets = gate.opened;
      const handledByA: string[] = [];
      const states: string[] = [];
      gate.mode = 'cut';
      // Its look at the group's members (for an earlier self) finds no coordinator, and it joins
      // without it; its first join finds none either: kafkajs gives up, and a restart is due in 1 s.
      const a = await logA.consume({ group, topic, handle: async (r) => void handledByA.push(r.value), onState: (state) => void states.push(state) });
      const restartDue = Date.now() + 1000;
      assert.equal(states, ['recovering']);
      assert.is(gate.cut, 2);
      await a.stop();
      gate.mode = 'pass';
      const openedByA = gate.opened;
      await waitUntil(() => gate.openSince(consumerSockets) === 0, 'a’s connections are closed', WAIT_MS);

      // Another member handles what is published once the cancelled restart would have run.
      const handledByB: string[] = [];
      const b = await logB.consume({ group, topic, handle: async (r) => void handledByB.push(r.value) });
      await waitUntil(() => Date.now() > restartDue + 500, 'the restart would have run by now', WAIT_MS);
      await logB.publish(topic, [{ key: 'k', value: 'after' }]);
      await waitUntil(() => handledByB.includes('after'), 'the other member handles the record', WAIT_MS);
      await b.stop();
      assert.equal(handledByA, []);
      assert.is(gate.opened, openedByA, 'a opened no connection after stop()');
      assert.equal(states, ['recovering']);
    } finally {
      await Promise.all([logA.close(), logB.close()]);
    }
  });

  test('stop() while such a restart is joining the group: it ends stopped and disconnected, not running', async () => {
    const gate = requestGate(FIND_COORDINATOR);
    const [logA, logB] = await Promise.all([open({ socketFactory: gate.socketFactory }), open()]);
    try {
      const topic = unique('kafka-restart-inflight');
      const group = unique('g');
      await logB.ensureTopic(topic, 1);
      const consumerSockets = gate.opened;
      const handledByA: string[] = [];
      const membershipOfA: string[] = [];
      gate.mode = 'cut';
      const a = await logA.consume({
        group,
        topic,
        handle: async (r) => void handledByA.push(r.value),
        onMembership: ({ change }) => void membershipOfA.push(change),
      });
      // The restart's request for its coordinator is held: the restart is under way.
      gate.mode = 'hold';
      await waitUntil(() => gate.held === 1, 'the restart asks for its coordinator', WAIT_MS);
      const stopping = a.stop();
      gate.release();
      await stopping;
      assert.equal(membershipOfA, ['joined', 'left'], 'the restart joined the group, and stop() made it leave');
      await waitUntil(() => gate.openSince(consumerSockets) === 0, 'a’s connections are closed', WAIT_MS);
      const openedByA = gate.opened;

      const handledByB: string[] = [];
      const b = await logB.consume({ group, topic, handle: async (r) => void handledByB.push(r.value) });
      await logB.publish(topic, [{ key: 'k', value: 'after' }]);
      await waitUntil(() => handledByB.includes('after'), 'the other member handles the record', WAIT_MS);
      await b.stop();
      assert.equal(handledByA, []);
      assert.is(gate.opened, openedByA, 'a opened no connection after stop()');
    } finally {
      await Promise.all([logA.close(), logB.close()]);
    }
  });

  test('ensureTopic creates a topic that keeps every record; one that existed is kept as it is, and what differs is warned of with the commands that change it', async () => {
    const admin = new Kafka({ clientId: 'relay-test-topics', brokers, logLevel: logLevel.NOTHING }).admin();
    await admin.connect();
    const lines: KafkaLogLine[] = [];
    const log = await open({ logLine: (line) => void lines.push(line) });
    const TOPIC = 2 as ConfigResourceTypes; // kafkajs's ConfigResourceTypes.TOPIC (see infra/kafka/log.ts)
    const names = ['retention.ms', 'retention.bytes', 'cleanup.policy', 'max.message.bytes'];
    const configOf = async (topic: string) => {
      const { resources } = await admin.describeConfigs({ includeSynonyms: false, resources: [{ type: TOPIC, name: topic, configNames: names }] });
      return Object.fromEntries(resources[0].configEntries.map((e) => [e.configName, e.configValue]));
    };
    const partitionsOf = async (topic: string) => (await admin.fetchTopicMetadata({ topics: [topic] })).topics[0].partitions.length;
    const about = (topic: string) => lines.filter((l) => l.fields.topic === topic);
    const made = (topic: string, numPartitions: number, config: Record<string, string>) =>
      admin.createTopics({ topics: [{ topic, numPartitions, configEntries: Object.entries(config).map(([name, value]) => ({ name, value })) }], waitForLeaders: true });
    const brokerList = brokers.join(',');
    try {
      // Relay's own: every record kept, large records taken; made again, nothing to say.
      const own = unique('kafka-own');
      await log.ensureTopic(own, 3);
      assert.equal(await configOf(own), { 'retention.ms': '-1', 'retention.bytes': '-1', 'cleanup.policy': 'delete', 'max.message.bytes': String(TOPIC_MAX_MESSAGE_BYTES) });
      assert.is(await partitionsOf(own), 3);
      await log.ensureTopic(own, 3);
      assert.equal(about(own), []);

      // Fewer partitions, a retention of a day, the broker's 1 MB record limit (a consumer's auto-creation).
      const fewer = unique('kafka-fewer');
      await made(fewer, 2, { 'retention.ms': '86400000' });
      const before = await configOf(fewer);
      await log.ensureTopic(fewer, 3);
      const [partitions, limit, retention] = [about(fewer).find((l) => 'partitions' in l.fields), about(fewer).find((l) => 'maxMessageBytes' in l.fields), about(fewer).find((l) => 'retentionMs' in l.fields)];
      assert.equal(about(fewer).length, 3, about(fewer).map((l) => l.message).join('\n'));
      assert.equal(partitions!.fields, { topic: fewer, partitions: 2, expectedPartitions: 3 });
      assert.is(partitions!.level, 'warn');
      assert.match(partitions!.message, `topic ${fewer} has 2 partitions, not the 3 Relay creates it with`);
      assert.match(partitions!.message, 'at most 2 of its instances handle records, the others none');
      assert.match(partitions!.message, `kafka-topics.sh --bootstrap-server ${brokerList} --alter --topic ${fewer} --partitions 3`);
      assert.is(limit!.level, 'warn');
      assert.match(limit!.message, `kafka-configs.sh --bootstrap-server ${brokerList} --alter --entity-type topics --entity-name ${fewer} --add-config max.message.bytes=${TOPIC_MAX_MESSAGE_BYTES}`);
      assert.is(retention!.level, 'warn');
      assert.equal(retention!.fields, { topic: fewer, retentionMs: '86400000', retentionBytes: '-1', cleanupPolicy: 'delete' });
      assert.match(retention!.message, 'retention.ms=86400000: records are deleted after 1 day');
      assert.match(retention!.message, `kafka-configs.sh --bootstrap-server ${brokerList} --alter --entity-type topics --entity-name ${fewer} --add-config retention.ms=-1`);
      assert.equal(await configOf(fewer), before, 'the topic is left as it was');
      assert.is(await partitionsOf(fewer), 2);

      // More partitions, no time bound but a size bound and compaction.
      const more = unique('kafka-more');
      await made(more, 4, { 'retention.ms': '-1', 'retention.bytes': '1048576', 'cleanup.policy': 'compact', 'max.message.bytes': String(TOPIC_MAX_MESSAGE_BYTES) });
      await log.ensureTopic(more, 3);
      assert.equal(about(more).length, 2, about(more).map((l) => l.message).join('\n'));
      const [wider, compacted] = [about(more).find((l) => 'partitions' in l.fields), about(more).find((l) => 'retentionMs' in l.fields)];
      assert.equal(wider!.fields, { topic: more, partitions: 4, expectedPartitions: 3 });
      assert.match(wider!.message, 'up to 4 instances of each consumer group share them');
      assert.match(compacted!.message, 'retention.bytes=1048576');
      assert.match(compacted!.message, 'compaction keeps only the last event of each stream');
      assert.match(compacted!.message, `--entity-name ${more} --add-config retention.bytes=-1,cleanup.policy=delete`);
      assert.not.match(compacted!.message, 'retention.ms=');
    } finally {
      await log.close();
      await admin.disconnect();
    }
  });

  test('kafkajs arms no negative timeouts: no TimeoutNegativeWarning from any client of this file (infra/kafka/request-queue-fix.ts)', async () => {
    const log = await open();
    try {
      await log.ensureTopic(unique('kafka-idle'), 1);
    } finally {
      await log.close();
    }
    await settle(50); // warnings are emitted on the next tick
    const negative = processWarnings.filter((w) => w.name === 'TimeoutNegativeWarning');
    assert.equal(negative.map((w) => w.message), []);
  });

  test.run();
}
