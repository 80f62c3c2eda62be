// An events topic that existed before Relay first started keeps its own partition count
// and configuration (Relay never changes an operator's topic), and the forwarder says at warn
// what differs from the topic it would have created, and what that means. The common way such a
// topic comes to exist is an analyst's consumer started first: Kafka's clients ask the broker to
// create a topic they subscribe to (the Java consumer's allow.auto.create.topics, kafkajs's
// allowAutoTopicCreation, both on by default; docs/analysing-events.md tells analysts to turn
// them off), and brokers do by default (auto.create.topics.enable), with their num.partitions
// and their default retention. The forwarder (infra/kafka/log.ts ensureTopic) then logs:
// - the topic's partition count next to EVENTS_TOPIC_PARTITIONS, the count the docs and the
//   catalog state (fewer partitions: fewer instances of each group get records);
// - that the topic deletes records (the broker's retention.ms), with the kafka-configs command
//   that lifts it (retention.ms=-1), while the topic itself is left as it was;
// - that its max.message.bytes is below what Relay's events need (as before).
//
// Driven as an analyst sees it: Kafka's Java console consumer subscribes first (a group of its
// own), then Relay's `setup`, `api` and `forwarder` run as processes on real Kafka.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as assert from 'uvu/assert';
import { openStores, type Stores } from '../apps/runtime.ts';
import { EVENTS_TOPIC_PARTITIONS, eventsTopic } from '../apps/pipeline/topics.ts';
import { loadConfig } from '../infra/config.ts';
import { waitUntil } from './support/eventually.ts';
import { consoleConsume, consoleConsumerMissing, describeTopicConfig } from './support/kafka-console-consumer.ts';
import { freePort, postEmail, runRelay, spawnRelay, waitForReady, type RelayProcess } from './support/relay-process.ts';
import { skippableSuite } from './support/skippable-suite.ts';

const brokers = process.env.RELAY_KAFKA_BROKERS;
const skipReason = !brokers ? 'RELAY_KAFKA_BROKERS is not set (start it with: eval "$(bash infra/engines/engines.sh up)")' : consoleConsumerMissing();

interface Ctx {
  dataDir: string;
  env: Record<string, string>;
  processes: RelayProcess[];
  stores?: Stores;
}

const test = skippableSuite<Ctx>('an events topic that existed before the forwarder: what differs is said', skipReason);

test.before(async (ctx) => {
  const run = randomBytes(4).toString('hex');
  ctx.dataDir = mkdtempSync(join(tmpdir(), 'relay-topic-partitions-'));
  ctx.env = { RELAY_DATA_DIR: ctx.dataDir, RELAY_KAFKA_BROKERS: brokers!, RELAY_LOG_NAMESPACE: `autocreated_${run}`, RELAY_LOG_FORMAT: 'json' };
  ctx.processes = [];
});

test.after(async (ctx) => {
  await Promise.all(ctx.processes.map((p) => p.stop()));
  await ctx.stores?.close();
  rmSync(ctx.dataDir, { recursive: true, force: true });
});

async function start(ctx: Ctx, args: string[]): Promise<{ url: string; process: RelayProcess }> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawnRelay(args, { ...ctx.env, PORT: String(port) });
  ctx.processes.push(child);
  await waitForReady(url, child, 60_000);
  return { url, process: child };
}

interface LogLine {
  level: number;
  component?: string;
  topic?: string;
  msg: string;
  [field: string]: unknown;
}

/** The process's JSON log lines about the topic from the Kafka log (component kafka-log). */
function topicLines(output: string, topic: string): LogLine[] {
  return output.split('\n').flatMap((line) => {
    try {
      const parsed = JSON.parse(line) as LogLine;
      return parsed.component === 'kafka-log' && parsed.topic === topic ? [parsed] : [];
    } catch {
      return [];
    }
  });
}

const WARN = 40; // pino's level number

test('an analyst consumer started before the forwarder: the topic it left behind is kept, and its partitions and retention are warned of', async (ctx) => {
  const topic = eventsTopic(ctx.env.RELAY_LOG_NAMESPACE);
  const group = `analytics.${ctx.env.RELAY_LOG_NAMESPACE}`;
  // The analyst's consumer comes up first (nothing to read yet); the broker creates the topic
  // for its subscription, with its own defaults.
  const early = await consoleConsume({ brokers: brokers!, topic, group, isolationLevel: 'read_committed', maxMessages: 1, idleMs: 3_000 });
  assert.is(early.length, 0);
  const before = await describeTopicConfig(brokers!, topic);
  assert.is.not(before['retention.ms'], '-1', 'the broker\'s default retention is finite');

  const setup = await runRelay(['setup', '--json', '--trust-domain', '--email', 'analyst@example.test', '--password', 'a long enough password', '--domain', 'example.test', '--environment', 'production', '--activate'], ctx.env);
  assert.is(setup.code, 0, setup.stderr);
  const apiKey = JSON.parse(setup.stdout).apiKey as string;
  const api = (await start(ctx, ['api'])).url;
  const forwarder = (await start(ctx, ['forwarder'])).process;
  await postEmail(api, apiKey, { from: 'app@example.test', to: 'ann@example.org', subject: 'Order 1', text: 'hi' });

  // Positive markers: the forwarder publishes to that topic (the analyst's group gets every
  // event), and it looked at the existing topic (its max.message.bytes warning).
  ctx.stores = await openStores(loadConfig({ ...ctx.env, RELAY_LOG_LEVEL: 'silent' }));
  const stored = await ctx.stores.events.readAll({ maxCount: 10_000 });
  const records = await consoleConsume({ brokers: brokers!, topic, group, isolationLevel: 'read_committed', maxMessages: stored.length });
  assert.equal(records.map((r) => JSON.parse(r.value.toString('utf8')).id).sort(), stored.map((e) => e.id).sort());
  await waitUntil(() => topicLines(forwarder.output(), topic).some((l) => l.msg.includes('max.message.bytes')), 'the forwarder reported the existing topic\'s record limit', 30_000);
  const lines = topicLines(forwarder.output(), topic);
  const all = lines.map((l) => l.msg).join('\n');

  // The partitions: the broker's num.partitions, kept, and said with both counts.
  const partitions = new Set((await ctx.stores.log.groupOffsets(topic, [group])).map((o) => o.partition)).size;
  assert.is.not(partitions, EVENTS_TOPIC_PARTITIONS, 'the broker created the topic with its own count (infra/engines/kafka.sh: num.partitions=4)');
  const aboutPartitions = lines.find((l) => l.partitions !== undefined);
  assert.ok(aboutPartitions, `a line about the topic's partitions; the forwarder said:\n${all}`);
  assert.is(aboutPartitions!.level, WARN);
  assert.is(aboutPartitions!.partitions, partitions);
  assert.is(aboutPartitions!.expectedPartitions, EVENTS_TOPIC_PARTITIONS);
  const text = aboutPartitions!.msg.split(topic).join('');
  assert.match(text, new RegExp(`\\b${partitions} partitions?\\b.*\\b${EVENTS_TOPIC_PARTITIONS}\\b`), 'both counts');
  if (partitions < EVENTS_TOPIC_PARTITIONS) assert.match(text, new RegExp(`at most ${partitions} of its instances handle records`), 'what fewer partitions mean');

  // The retention: the broker's, kept, and said with the command that lifts it.
  const aboutRetention = lines.find((l) => l.retentionMs !== undefined);
  assert.ok(aboutRetention, `a line about the topic's retention; the forwarder said:\n${all}`);
  assert.is(aboutRetention!.level, WARN);
  assert.is(aboutRetention!.retentionMs, before['retention.ms']);
  assert.ok(aboutRetention!.msg.includes(`retention.ms=${before['retention.ms']}`), aboutRetention!.msg);
  assert.ok(aboutRetention!.msg.includes(`kafka-configs.sh --bootstrap-server ${brokers} --alter --entity-type topics --entity-name ${topic} --add-config retention.ms=-1`), aboutRetention!.msg);

  // Nothing of the operator's topic was changed.
  const after = await describeTopicConfig(brokers!, topic);
  assert.is(after['retention.ms'], before['retention.ms']);
  assert.is(after['max.message.bytes'], before['max.message.bytes']);
  assert.is(new Set((await ctx.stores.log.groupOffsets(topic, [group])).map((o) => o.partition)).size, partitions);
});

test.run();
