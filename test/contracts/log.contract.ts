// The promises of infra/ports/log.ts, for any adapter (sqlite, Kafka). Brokers are slow to
// form groups, so every wait polls until a condition holds with a generous deadline; topics
// and groups get random names so the suite can share a broker with anything.
import { randomUUID } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { Log, LogConsumer, LogRecord, OutgoingRecord } from '../../infra/ports/log.ts';
import { deferred, settle, waitUntil } from '../support/eventually.ts';
import { keysByPartition } from '../support/log-keys.ts';

export interface OpenedLog {
  log: Log;
  close: () => Promise<void>;
  /** Makes the log's reads fail (true) until called with false, as an outage would; Kafka's is a broker restart (test/liveness-kafka.e2e.test.ts). */
  failReads?: (failing: boolean) => void;
}

export type OpenLog = () => Promise<OpenedLog>;

const WAIT_MS = 30_000;

function unique(prefix: string): string {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}

async function newTopic(log: Log, partitions: number): Promise<string> {
  const topic = unique('contract-topic');
  await log.ensureTopic(topic, partitions);
  return topic;
}

function records(prefix: string, count: number, key?: (i: number) => string): OutgoingRecord[] {
  return Array.from({ length: count }, (_, i) => ({ key: key ? key(i) : `${prefix}-key-${i}`, value: `${prefix}-${i}` }));
}

/** The first delivery of each value, in delivery order: at-least-once allows repeats, order is about first sight. */
function firstSeen(values: string[]): string[] {
  return [...new Set(values)];
}

/** options.noReadFailures: why the adapter's opener cannot make reads fail (that test is then registered as skipped). */
export function logContract(adapterName: string, open: OpenLog, options: { noReadFailures?: string } = {}): void {
  const test = suite<OpenedLog>(`log contract: ${adapterName}`);
  const consumers: LogConsumer[] = [];
  const track = (consumer: LogConsumer) => {
    consumers.push(consumer);
    return consumer;
  };

  test.before(async (context) => {
    Object.assign(context, await open());
  });

  test.after.each(async () => {
    await Promise.all(consumers.splice(0).map((c) => c.stop()));
  });

  test.after(async (context) => {
    await context.close();
  });

  test('ping answers; ensureTopic is idempotent', async ({ log }) => {
    assert.is(await log.ping(), true);
    const topic = await newTopic(log, 2);
    await log.ensureTopic(topic, 2);
  });

  test('a record arrives with its topic, partition, offset, key, value and headers', async ({ log }) => {
    const topic = await newTopic(log, 3);
    await log.publish(topic, [{ key: 'k-1', value: '{"hello":"wörld"}', headers: { 'content-type': 'application/json', trace: 't-1' } }]);
    const seen: LogRecord[] = [];
    track(await log.consume({ group: unique('g'), topic, handle: async (r) => void seen.push(r) }));
    await waitUntil(() => seen.length >= 1, 'the record arrives', WAIT_MS);
    const [record] = seen;
    assert.is(record.topic, topic);
    assert.ok(Number.isInteger(record.partition) && record.partition >= 0 && record.partition < 3, `partition ${record.partition}`);
    assert.match(record.offset, /^\d+$/);
    assert.is(record.key, 'k-1');
    assert.is(record.value, '{"hello":"wörld"}');
    assert.equal(record.headers, { 'content-type': 'application/json', trace: 't-1' });
  });

  test('records of one key keep their order and their partition; every record is delivered', async ({ log }) => {
    const topic = await newTopic(log, 4);
    const keys = Array.from({ length: 6 }, (_, i) => `order-${i}`);
    const perKey = 15;
    // Several publish calls, each interleaving every key.
    for (let round = 0; round < 5; round++) {
      const batch: OutgoingRecord[] = [];
      for (let j = 0; j < perKey / 5; j++) {
        for (const key of keys) batch.push({ key, value: `${key}:${round * (perKey / 5) + j}` });
      }
      await log.publish(topic, batch);
    }
    const seen: LogRecord[] = [];
    track(await log.consume({ group: unique('g'), topic, handle: async (r) => void seen.push(r) }));
    await waitUntil(() => new Set(seen.map((r) => r.value)).size >= keys.length * perKey, 'every record is delivered', WAIT_MS);
    for (const key of keys) {
      const ofKey = seen.filter((r) => r.key === key);
      assert.equal(
        firstSeen(ofKey.map((r) => r.value)),
        Array.from({ length: perKey }, (_, i) => `${key}:${i}`),
        `records of ${key} arrive in publish order`,
      );
      assert.is(new Set(ofKey.map((r) => r.partition)).size, 1, `${key} stays in one partition`);
    }
    for (const partition of new Set(seen.map((r) => r.partition))) {
      const offsets = seen.filter((r) => r.partition === partition).map((r) => BigInt(r.offset));
      const distinct = [...new Set(offsets)];
      assert.ok(distinct.every((o, i) => i === 0 || o > distinct[i - 1]), `offsets of partition ${partition} increase`);
    }
  });

  test('a failing handler retries the same record and nothing behind it in the partition is delivered meanwhile', async ({ log }) => {
    const topic = await newTopic(log, 1);
    await log.publish(topic, records('r', 5, () => 'same-key'));
    const calls: string[] = [];
    const reported: Array<{ message: string; value: string }> = [];
    let failuresLeft = 2;
    track(
      await log.consume({
        group: unique('g'),
        topic,
        handle: async (r) => {
          calls.push(r.value);
          if (r.value === 'r-2' && failuresLeft > 0) {
            failuresLeft--;
            throw new Error('downstream unavailable');
          }
        },
        onHandlerError: (error, record) => reported.push({ message: error.message, value: record.value }),
      }),
    );
    await waitUntil(() => calls.includes('r-4'), 'the records after the failing one arrive', WAIT_MS);
    const attempts = calls.filter((v) => v === 'r-2').length;
    assert.ok(attempts >= 3, `r-2 was tried ${attempts} times`);
    assert.ok(calls.indexOf('r-3') > calls.lastIndexOf('r-2'), `r-3 waited for r-2 to succeed: ${calls.join(' ')}`);
    assert.equal(firstSeen(calls), ['r-0', 'r-1', 'r-2', 'r-3', 'r-4']);
    assert.equal(reported, [
      { message: 'downstream unavailable', value: 'r-2' },
      { message: 'downstream unavailable', value: 'r-2' },
    ]);
  });

  test('a handler that has not returned on one partition does not hold up the others', async ({ log }) => {
    const topic = await newTopic(log, 3);
    const [stuckKey, ...otherKeys] = keysByPartition(3);
    await log.publish(topic, [
      { key: stuckKey, value: 'held' },
      { key: stuckKey, value: 'behind-held' },
      ...otherKeys.flatMap((key) => [{ key, value: `${key}-a` }, { key, value: `${key}-b` }]),
    ]);
    const seen: string[] = [];
    const release = deferred();
    track(await log.consume({
      group: unique('g'),
      topic,
      handle: async (r) => {
        seen.push(r.value);
        if (r.value === 'held') await release.promise;
      },
    }));
    try {
      const others = otherKeys.flatMap((key) => [`${key}-a`, `${key}-b`]);
      await waitUntil(() => others.every((v) => seen.includes(v)), 'the other partitions are handled while one handler waits', WAIT_MS);
      assert.ok(seen.includes('held'));
      assert.not.ok(seen.includes('behind-held'), 'a record behind the waiting handler was delivered before it returned');
    } finally {
      release.resolve();
    }
    await waitUntil(() => seen.includes('behind-held'), 'the held partition goes on once its handler returns', WAIT_MS);
  });

  test('stop() lets the in-flight handler finish and commits: a restarted consumer resumes without loss or repeats', async ({ log }) => {
    const topic = await newTopic(log, 1);
    const group = unique('g');
    await log.publish(topic, records('s', 20, () => 'one-key'));
    const first: string[] = [];
    const consumer = await log.consume({
      group,
      topic,
      handle: async (r) => {
        await settle(10);
        first.push(r.value);
      },
    });
    await waitUntil(() => first.length >= 5, 'some records are handled', WAIT_MS);
    await consumer.stop();
    const handledBeforeStop = first.length;
    assert.ok(handledBeforeStop < 20, 'the consumer was stopped midway');

    await log.publish(topic, records('t', 3, () => 'one-key'));
    const second: string[] = [];
    track(await log.consume({ group, topic, handle: async (r) => void second.push(r.value) }));
    await waitUntil(() => second.includes('t-2'), 'the restarted consumer reaches the new records', WAIT_MS);
    // By then the stopped consumer would have had every record the new one handled.
    assert.is(first.length, handledBeforeStop, 'nothing is handled after stop() resolved');
    const all = [...records('s', 20), ...records('t', 3)].map((r) => r.value);
    assert.equal([...first, ...second], all, 'resumed right after the last committed record');
  });

  test('a record whose handler was cut short before commit is redelivered to the next consumer', async ({ log }) => {
    const topic = await newTopic(log, 1);
    const group = unique('g');
    await log.publish(topic, records('k', 4, () => 'one-key'));
    const crash = deferred();
    const firstCalls: string[] = [];
    const consumer = await log.consume({
      group,
      topic,
      handle: async (r) => {
        firstCalls.push(r.value);
        // The "process" dies in the middle of k-1: its handler never completes normally.
        if (r.value === 'k-1') await crash.promise;
      },
      onHandlerError: () => {},
    });
    await waitUntil(() => firstCalls.includes('k-1'), 'k-1 is being handled', WAIT_MS);
    const stopping = consumer.stop();
    crash.reject(new Error('killed'));
    await stopping;
    assert.equal(firstCalls, ['k-0', 'k-1']);

    const secondCalls: string[] = [];
    track(await log.consume({ group, topic, handle: async (r) => void secondCalls.push(r.value) }));
    await waitUntil(() => secondCalls.includes('k-3'), 'the next consumer gets the rest', WAIT_MS);
    assert.equal(secondCalls, ['k-1', 'k-2', 'k-3'], 'k-1 was not committed, so it comes again; k-0 was');
  });

  test('two groups keep their own offsets and progress independently', async ({ log }) => {
    const topic = await newTopic(log, 2);
    const stuckGroup = unique('stuck');
    await log.publish(topic, records('i', 10, () => 'one-key'));
    const stuckCalls: string[] = [];
    const stuck = await log.consume({
      group: stuckGroup,
      topic,
      handle: async (r) => {
        stuckCalls.push(r.value);
        if (r.value === 'i-3') throw new Error('poison record');
      },
      onHandlerError: () => {},
    });
    const free: string[] = [];
    track(await log.consume({ group: unique('free'), topic, handle: async (r) => void free.push(r.value) }));
    await waitUntil(() => free.length >= 10, 'the healthy group reads everything', WAIT_MS);
    await waitUntil(() => stuckCalls.filter((v) => v === 'i-3').length >= 2, 'the other group retries its poison record', WAIT_MS);
    assert.equal(firstSeen(free), records('i', 10).map((r) => r.value));
    assert.ok(!stuckCalls.includes('i-4'), 'the stuck group did not skip ahead');
    await stuck.stop();

    const resumed: string[] = [];
    track(await log.consume({ group: stuckGroup, topic, handle: async (r) => void resumed.push(r.value) }));
    await waitUntil(() => resumed.includes('i-9'), 'the stuck group resumes once its handler works', WAIT_MS);
    assert.equal(resumed, ['i-3', 'i-4', 'i-5', 'i-6', 'i-7', 'i-8', 'i-9']);
  });

  test('a group that names its types gets every record of them and every record without a type; its offsets move past the rest', async ({ log }) => {
    const topic = await newTopic(log, 2);
    const group = unique('typed');
    const typed = (i: number, type: string | null): OutgoingRecord => ({
      key: `k-${i % 3}`, value: `t-${i}`, ...(type === null ? {} : { headers: { 'event-type': type } }),
    });
    const sent = Array.from({ length: 30 }, (_, i) => typed(i, i % 5 === 4 ? null : ['Wanted', 'Other', 'Also'][i % 3]));
    await log.publish(topic, sent);
    const got: LogRecord[] = [];
    track(await log.consume({ group, topic, types: ['Wanted', 'Also'], handle: async (r) => void got.push(r) }));
    const due = sent.filter((r) => r.headers?.['event-type'] !== 'Other').map((r) => r.value);
    await waitUntil(() => due.every((v) => got.some((r) => r.value === v)), 'every record of a wanted type or without one arrives', WAIT_MS);
    await waitUntil(async () => {
      const offsets = await log.groupOffsets(topic, [group]);
      return offsets.every((o) => (o.committed ?? o.start) === o.end);
    }, 'the group has committed every partition to its end', WAIT_MS);
  });

  test('consumers of one group split the partitions, each record handled once, and take over when one stops', async ({ log }) => {
    const topic = await newTopic(log, 4);
    const group = unique('g');
    const handledBy = new Map<string, string[]>();
    const handler = (name: string) => async (r: LogRecord) => {
      const by = handledBy.get(r.value) ?? [];
      by.push(name);
      handledBy.set(r.value, by);
    };
    const one = await log.consume({ group, topic, handle: handler('one') });
    const two = track(await log.consume({ group, topic, handle: handler('two') }));
    track(one);
    const handlers = () => new Set([...handledBy.values()].flat());
    const published: string[] = [];
    // A broker may take a while to rebalance after the second member joins: keep publishing
    // until both members have handled something.
    const deadline = Date.now() + WAIT_MS;
    for (let round = 0; handlers().size < 2; round++) {
      assert.ok(Date.now() < deadline, 'both members got partitions');
      const batch = records(`round${round}`, 16);
      await log.publish(topic, batch);
      published.push(...batch.map((r) => r.value));
      await waitUntil(() => published.every((v) => handledBy.has(v)), 'the round is handled', WAIT_MS);
    }
    for (const value of published) assert.is(handledBy.get(value)!.length, 1, `${value} handled once`);

    await two.stop();
    const after = records('after', 16).map((r) => r.value);
    await log.publish(topic, records('after', 16));
    await waitUntil(() => after.every((v) => handledBy.has(v)), 'the remaining member takes every partition', WAIT_MS);
    for (const value of after) assert.equal(handledBy.get(value), ['one'], `${value} handled once, by the remaining member`);
  });

  test('groupOffsets: every partition’s start and end, each group’s committed offset (null before its first commit); membership is told', async ({ log }) => {
    const topic = await newTopic(log, 2);
    const [k0, k1] = keysByPartition(2);
    const reading = unique('reading');
    const idle = unique('idle');
    const offsetsOf = async () => {
      const rows = await log.groupOffsets(topic, [reading, idle]);
      return Object.fromEntries(rows.map((r) => [`${r.group === reading ? 'reading' : 'idle'}/${r.partition}`, [r.start, r.end, r.committed]]));
    };
    assert.equal(await offsetsOf(), {
      'reading/0': ['0', '0', null], 'reading/1': ['0', '0', null], 'idle/0': ['0', '0', null], 'idle/1': ['0', '0', null],
    }, 'an empty topic; no group has committed');

    await log.publish(topic, [{ key: k0, value: 'a' }, { key: k0, value: 'b' }, { key: k0, value: 'c' }, { key: k1, value: 'd' }]);
    const changes: string[] = [];
    const handled: string[] = [];
    const consumer = await log.consume({
      group: reading,
      topic,
      handle: async (r) => void handled.push(r.value),
      onMembership: (m) => {
        assert.is(m.group, reading);
        assert.is(m.topic, topic);
        changes.push(`${m.change}:${m.partitions.join(',')}`);
      },
    });
    await waitUntil(() => handled.length === 4, 'the reading group handles all four', WAIT_MS);
    await waitUntil(async () => (await offsetsOf())['reading/0'][2] === '3' && (await offsetsOf())['reading/1'][2] === '1', 'its commits show', WAIT_MS);
    await consumer.stop();
    assert.equal(await offsetsOf(), {
      'reading/0': ['0', '3', '3'], 'reading/1': ['0', '1', '1'], 'idle/0': ['0', '3', null], 'idle/1': ['0', '1', null],
    }, 'ends follow the records; only the reading group committed');
    assert.is(changes[0].split(':')[0], 'joined', changes.join(' '));
    assert.ok(changes.some((c) => c.endsWith(':0,1')), `told it owns both partitions: ${changes.join(' ')}`);
    assert.is(changes[changes.length - 1], 'left:', changes.join(' '));
  });

  const readFailures = options.noReadFailures === undefined ? test : (name: string) => {
    console.log(`${name}: skipped: ${options.noReadFailures}`);
    test.skip(name);
  };
  readFailures('a consumer whose reads fail for a while says it is recovering, then running, and then delivers every record once', async ({ log, failReads }) => {
    const topic = await newTopic(log, 2);
    await log.publish(topic, records('before', 4));
    const seen: string[] = [];
    const states: string[] = [];
    track(await log.consume({
      group: unique('g'), topic, fromBeginning: true,
      handle: async (r) => void seen.push(r.value),
      onState: (state) => void states.push(state),
    }));
    await waitUntil(() => seen.length >= 4, 'the first records arrive', WAIT_MS);
    failReads!(true);
    await log.publish(topic, records('during', 4));
    await waitUntil(() => states.includes('recovering'), 'the consumer says it is recovering', WAIT_MS);
    assert.is(seen.length, 4, 'nothing is delivered while reads fail');
    failReads!(false);
    await log.publish(topic, records('after', 2));
    await waitUntil(() => seen.length >= 10, 'every record arrives once reads work again', WAIT_MS);
    await settle(200);
    assert.equal([...seen].sort(), [...records('before', 4), ...records('during', 4), ...records('after', 2)].map((r) => r.value).sort(), 'each record once');
    assert.equal(states, ['recovering', 'running']);
  });

  test.run();
}
