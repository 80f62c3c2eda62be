// The events topic keeps every event, so that an analyst's own consumer group reads the whole
// history from the beginning, as docs/analysing-events.md tells analysts to ("a consumer group
// of your own", `fromBeginning: true`, "from history and live"). In distributed mode the
// forwarder creates `<namespace>.events` (infra/kafka/log.ts ensureTopic) with the configuration
// of infra/kafka/topic-config.ts: retention.ms and retention.bytes -1 (no time or size bound,
// where Kafka's default deletes records after 7 days) and cleanup.policy delete (compaction would
// keep only the last event of each stream, the record key). The event catalog
// (GET /v1/asyncapi.json) states that configuration in its Kafka channel binding
// (topicConfiguration), and it is the topic's real one; the forwarder, which made the topic
// itself, warns of nothing about it.
//
// Driven as an analyst sees it: Relay's `setup`, `api` and `forwarder` as processes on real
// Kafka; the records read by Kafka's own Java console consumer in a group of the analyst's own,
// from the beginning; the topic's configuration read by Kafka's own kafka-configs.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as assert from 'uvu/assert';
import { openStores, type Stores } from '../apps/runtime.ts';
import { eventsTopic } from '../apps/pipeline/topics.ts';
import { loadConfig } from '../infra/config.ts';
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

const test = skippableSuite<Ctx>('the events topic keeps the history an analyst is told to replay', skipReason);

test.before(async (ctx) => {
  const run = randomBytes(4).toString('hex');
  ctx.dataDir = mkdtempSync(join(tmpdir(), 'relay-topic-retention-'));
  ctx.env = { RELAY_DATA_DIR: ctx.dataDir, RELAY_KAFKA_BROKERS: brokers!, RELAY_LOG_NAMESPACE: `retention_${run}`, RELAY_LOG_FORMAT: 'json' };
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

test('every event reaches an analyst group from the beginning, and the topic keeps them all, as the catalog states', async (ctx) => {
  const setup = await runRelay(['setup', '--json', '--trust-domain', '--email', 'analyst@example.test', '--password', 'a long enough password', '--domain', 'example.test', '--environment', 'production', '--activate'], ctx.env);
  assert.is(setup.code, 0, setup.stderr);
  const apiKey = JSON.parse(setup.stdout).apiKey as string;
  const api = (await start(ctx, ['api'])).url;
  const forwarder = (await start(ctx, ['forwarder'])).process;
  await postEmail(api, apiKey, { from: 'app@example.test', to: 'ann@example.org', subject: 'Order 1', text: 'hi' });

  // The positive marker: the analyst's own group, from the beginning, is handed every event the
  // event store holds (the topic exists and is Relay's own, made by the forwarder, whose start,
  // and any warning about the topic, came before it published).
  ctx.stores = await openStores(loadConfig({ ...ctx.env, RELAY_LOG_LEVEL: 'silent' }));
  const stored = await ctx.stores.events.readAll({ maxCount: 10_000 });
  const topic = eventsTopic(ctx.env.RELAY_LOG_NAMESPACE);
  const group = `analytics.${ctx.env.RELAY_LOG_NAMESPACE}`;
  const records = await consoleConsume({ brokers: brokers!, topic, group, isolationLevel: 'read_committed', maxMessages: stored.length });
  assert.equal(records.map((r) => JSON.parse(r.value.toString('utf8')).id).sort(), stored.map((e) => e.id).sort(), 'every event, once');

  const config = await describeTopicConfig(brokers!, topic);
  assert.is(config['retention.ms'], '-1', 'no time bound: Kafka\'s default would delete records after 7 days');
  assert.is(config['retention.bytes'], '-1', 'no size bound deletes records either');
  assert.is(config['cleanup.policy'], 'delete', 'not compacted: compaction would keep only the last event of each stream');

  const catalog = (await (await fetch(`${api}/v1/asyncapi.json`)).json()) as { channels: { events: { bindings: { kafka: { partitions: number; topicConfiguration?: Record<string, unknown> } } } } };
  const binding = catalog.channels.events.bindings.kafka;
  assert.equal(binding.topicConfiguration, {
    'cleanup.policy': [config['cleanup.policy']],
    'retention.ms': Number(config['retention.ms']),
    'retention.bytes': Number(config['retention.bytes']),
    'max.message.bytes': Number(config['max.message.bytes']),
  }, 'the catalog states the configuration the topic has');
  const partitions = new Set((await ctx.stores.log.groupOffsets(topic, [group])).map((o) => o.partition)).size;
  assert.is(binding.partitions, partitions, 'and its partition count');

  const aboutTopic = forwarder.output().split('\n').filter((line) => line.includes(topic) && /"component":"kafka-log"/.test(line));
  assert.equal(aboutTopic, [], 'the forwarder made the topic: nothing about it to warn of');
});

test.run();
