// The Kafka log's wait for an earlier self (infra/kafka/log.ts, waitForEarlierSelf), on a real
// broker: a starting consumer that finds a member of its own instance name in its group, beside
// other members, waits for that member to leave before it joins, so that the others keep their
// partitions. The wait is bounded: a member of that name that stays is alive, another process
// under the same name (two instances on one host without RELAY_INSTANCE_ID), and the consumer
// joins anyway after the session timeout and a margin, with a warning naming RELAY_INSTANCE_ID,
// never a deadlock. A stop during the wait ends it, and nothing joins.
//
// The member of the same name is the log-consumer fixture, a process of its own that takes the
// default instance name (the host name), as this process's consumer under test does; the other
// member has a name of its own. Sessions are 6 s (the broker's least), so the bound is 9 s.
import { randomUUID } from 'node:crypto';
import * as assert from 'uvu/assert';
import { KafkaLog, type KafkaLogLine, type KafkaLogOptions } from '../infra/kafka/log.ts';
import { waitUntil } from './support/eventually.ts';
import { startFixture, type FixtureProcess } from './support/fixture-process.ts';
import { skippableSuite } from './support/skippable-suite.ts';

const brokers = process.env.RELAY_KAFKA_BROKERS?.split(',').map((b) => b.trim()).filter(Boolean) ?? [];
const SESSION_TIMEOUT_MS = 6000;
/** The session timeout and the adapter's margin (EARLIER_SELF_MARGIN_MS). */
const BOUND_MS = SESSION_TIMEOUT_MS + 3000;
const WAIT_MS = 40_000;

const test = skippableSuite('kafka log: a starting consumer and its earlier self',
  brokers.length > 0 ? undefined : 'RELAY_KAFKA_BROKERS is not set (start a broker with: eval "$(bash infra/engines/engines.sh up)")');

const unique = (prefix: string) => `${prefix}-${randomUUID().slice(0, 8)}`;
const open = (options: KafkaLogOptions = {}) => KafkaLog.connect(brokers, { sessionTimeoutMs: SESSION_TIMEOUT_MS, heartbeatIntervalMs: 500, ...options });

interface Setup {
  topic: string;
  group: string;
  /** A live member under the default instance name, in a process of its own. */
  sameName: FixtureProcess;
  /** A member under another name, in this process. */
  other: KafkaLog;
  close(): Promise<void>;
}

async function groupWithSameNamedMember(): Promise<Setup> {
  const topic = unique('kafka-earlier-self');
  const group = unique('g');
  const other = await open({ instanceId: 'another-instance' });
  await other.ensureTopic(topic, 2);
  const sameName = startFixture(new URL('./fixtures/log-consumer.ts', import.meta.url), ['kafka', brokers.join(','), topic, group, String(SESSION_TIMEOUT_MS)]);
  await sameName.waitForLine((l) => l.includes('"ready"'), 'the member of the same name joined', WAIT_MS);
  const consumer = await other.consume({ group, topic, handle: async () => {} });
  return {
    topic, group, sameName, other,
    async close() {
      sameName.child.kill('SIGKILL');
      await sameName.exited;
      await consumer.stop();
      await other.close();
    },
  };
}

test('a member of its own name that stays: the consumer joins after the session timeout and a margin, with a warning to set RELAY_INSTANCE_ID', async () => {
  const setup = await groupWithSameNamedMember();
  const said: KafkaLogLine[] = [];
  const log = await open({ logLine: (line) => void said.push(line) });
  try {
    const membership: string[] = [];
    const startedAt = Date.now();
    const joining = log.consume({ group: setup.group, topic: setup.topic, handle: async () => {}, onMembership: ({ change }) => void membership.push(change) });
    await waitUntil(() => said.some((l) => l.level === 'info' && /is still in the group \(this instance before a crash/.test(l.message)), 'the consumer says it waits', WAIT_MS);
    const consumer = await joining;
    const joinedAt = Date.now();

    const warning = said.find((l) => l.level === 'warn' && l.source === 'kafka-log');
    assert.ok(warning, `a warning: ${JSON.stringify(said)}`);
    assert.match(warning!.message, `group ${setup.group}: a member named `);
    assert.match(warning!.message, /is still in the group after \d+ ms, past the session timeout \(6000 ms\): it is alive, so another process runs under the same name; joining anyway/);
    assert.match(warning!.message, /set RELAY_INSTANCE_ID/);
    assert.ok((warning!.fields.waitedMs as number) >= BOUND_MS, `waited ${String(warning!.fields.waitedMs)} ms, the bound is ${BOUND_MS}`);
    assert.ok(joinedAt - startedAt >= BOUND_MS, 'the join came after the bound');
    assert.not.ok(said.some((l) => /left after|joining$/.test(l.message)), 'no line says the earlier member left');
    assert.equal(membership, ['joined'], 'it is a member of the group');
    await consumer.stop();
  } finally {
    await log.close();
    await setup.close();
  }
});

test('a stop during the wait ends it at once: nothing joins, and no warning comes', async () => {
  const setup = await groupWithSameNamedMember();
  const said: KafkaLogLine[] = [];
  const log = await open({ logLine: (line) => void said.push(line) });
  try {
    const joining = log.consume({ group: setup.group, topic: setup.topic, handle: async () => {} });
    const outcome = joining.then(() => 'joined', (error: Error) => error.message);
    await waitUntil(() => said.some((l) => /is still in the group \(this instance before a crash/.test(l.message)), 'the consumer says it waits', WAIT_MS);
    await log.close();
    assert.match(await outcome, /was stopped before it joined/);
    // The wait is over (close() waited for it): what it said is all it will say.
    assert.equal(said.filter((l) => l.source === 'kafka-log').map((l) => l.level), ['info']);
    assert.is(setup.sameName.child.exitCode, null, 'the member of the same name still runs');
  } finally {
    await log.close();
    await setup.close();
  }
});

test.run();
