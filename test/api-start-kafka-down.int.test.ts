// `relay api` starts while Kafka is down, and connects once it is back. The API neither
// publishes to nor consumes from Kafka (the forwarder carries events there); it only reads
// consumer groups' offsets, for admission flow control and /metrics. So an API instance that
// starts or restarts during an outage (a deploy, a crash, a rescheduled pod) serves: it admits
// sends (flow control lets them through: the backlog cannot be read), /metrics says the log's
// offsets could not be read, and the log is connected behind it, tried again until the broker
// answers (apps/runtime.ts, infra/connecting-log.ts). Processes that run the forwarder or a
// processor still need the log to start.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { EVENTS_TOPIC_PARTITIONS, eventsTopic } from '../apps/pipeline/topics.ts';
import { KafkaLog } from '../infra/kafka/log.ts';
import { waitUntil } from './support/eventually.ts';
import { scrape, sumOf, samplesOf } from './support/metrics.ts';
import { startPrivateKafka, type PrivateEngine } from './support/private-engine.ts';
import { freePort, runRelay, spawnRelay, type RelayProcess } from './support/relay-process.ts';
import { skippableSuite } from './support/skippable-suite.ts';

/** `relay setup` on an embedded data directory (setup needs no log), and its API key. */
async function setUp(dataDir: string): Promise<string> {
  const setup = await runRelay(['setup', '--json', '--trust-domain', '--email', 'ops@example.test', '--password', 'a long enough password', '--domain', 'example.test'], { RELAY_DATA_DIR: dataDir });
  assert.is(setup.code, 0, setup.stderr);
  return JSON.parse(setup.stdout).apiKey as string;
}

const withoutKafkajs = (output: string) => output.split('\n').filter((line) => !line.startsWith('[kafkajs]')).join('\n');

/** Sends until one is admitted or the API exits; the last status. */
async function admitOne(api: RelayProcess, url: string, apiKey: string): Promise<number | string> {
  let status: number | string = 'no answer';
  await waitUntil(async () => {
    if (api.child.exitCode !== null) return true;
    status = await fetch(`${url}/v1/emails`, {
      method: 'POST', signal: AbortSignal.timeout(3_000),
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ from: 'hello@example.test', to: 'you@example.test', subject: 'hi', text: 'hi' }),
    }).then((r) => r.status, () => 'no answer');
    return status === 202;
  }, 'the API to admit an email or exit', 20_000).catch(() => {});
  assert.is(api.child.exitCode, null, `relay api exited with ${api.child.exitCode}:\n${withoutKafkajs(api.output())}`);
  return status;
}

const logOffsetsRead = async (url: string) => sumOf(await scrape(url), 'relay_metrics_collector_up', { collector: 'log_offsets' });

const unreachable = suite('relay api starting while no Kafka broker answers');

unreachable('starts, admits an email, and says on /metrics that the log cannot be read', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-api-kafka-down-'));
  try {
    const apiKey = await setUp(dataDir);
    const port = await freePort();
    // A port nothing listens on: the broker is down. Flow control watches groups, so it reads.
    const api = spawnRelay(['api'], {
      RELAY_DATA_DIR: dataDir, PORT: String(port), RELAY_KAFKA_BROKERS: `127.0.0.1:${await freePort()}`, RELAY_ADMISSION_BACKLOG_GROUPS: 'projector,sender',
    });
    try {
      const url = `http://127.0.0.1:${port}`;
      assert.is(await admitOne(api, url, apiKey), 202);
      assert.is(await logOffsetsRead(url), 0, 'the log_offsets collector read nothing');
    } finally {
      await api.stop();
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

unreachable('writes the Kafka client\'s complaints as structured log lines, not as text on stderr', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-api-kafka-lines-'));
  try {
    await setUp(dataDir);
    const port = await freePort();
    const api = spawnRelay(['api'], {
      RELAY_DATA_DIR: dataDir, PORT: String(port), RELAY_KAFKA_BROKERS: `127.0.0.1:${await freePort()}`, RELAY_LOG_FORMAT: 'json',
    });
    try {
      const kafkajsLine = () => api.output().split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as Record<string, unknown>)
        .find((entry) => entry.component === 'kafkajs');
      await waitUntil(() => api.child.exitCode !== null || kafkajsLine() !== undefined, 'a log line from the Kafka client', 20_000);
      const entry = kafkajsLine();
      assert.ok(entry, `no structured line from the Kafka client:\n${api.output()}`);
      assert.type(entry.msg, 'string');
      assert.ok(Number(entry.level) >= 40, `a connection refused is a warning or an error: ${JSON.stringify(entry)}`);
      assert.equal(api.output().split('\n').filter((line) => line.startsWith('[kafkajs]') || line.startsWith('[kafka-log]')), []);
    } finally {
      await api.stop();
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

unreachable.run();

const returning = skippableSuite('relay api started while Kafka was down, once it is back', process.env.RELAY_KAFKA_BROKERS ? undefined : 'the engines are not installed here (eval "$(bash infra/engines/engines.sh up)")');

returning('connects to the log in the background: /metrics reads the offsets', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-api-kafka-back-'));
  let kafka: PrivateEngine | null = null;
  try {
    kafka = await startPrivateKafka();
    const namespace = `api_${randomUUID().slice(0, 8)}`;
    // The topic a forwarder would have made before the outage.
    const log = await KafkaLog.connect([kafka.address], { logLevel: 'nothing' });
    await log.ensureTopic(eventsTopic(namespace), EVENTS_TOPIC_PARTITIONS);
    await log.close();
    await kafka.halt();
    const apiKey = await setUp(dataDir);
    const port = await freePort();
    const api = spawnRelay(['api'], { RELAY_DATA_DIR: dataDir, PORT: String(port), RELAY_KAFKA_BROKERS: kafka.address, RELAY_LOG_NAMESPACE: namespace });
    try {
      const url = `http://127.0.0.1:${port}`;
      assert.is(await admitOne(api, url, apiKey), 202);
      assert.is(await logOffsetsRead(url), 0);
      await kafka.resume();
      await waitUntil(async () => (await logOffsetsRead(url)) === 1, '/metrics to read the log offsets', 90_000);
      const ends = samplesOf(await scrape(url), 'relay_log_end_offset', { topic: eventsTopic(namespace) });
      assert.is(ends.length, EVENTS_TOPIC_PARTITIONS);
      assert.is(api.child.exitCode, null);
    } finally {
      await api.stop();
    }
  } finally {
    await kafka?.stop().catch(() => {});
    rmSync(dataDir, { recursive: true, force: true });
  }
});

returning.run();
