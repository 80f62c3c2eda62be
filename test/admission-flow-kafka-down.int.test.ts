// Admission flow control while Kafka is down, through a real `relay api` and a real broker that
// goes away: the backlog read (Log.groupOffsets) then only fails after kafkajs's own retries,
// seconds later, and a send must not wait for that. Each send is answered within maxWaitMs
// (1 s) plus slack, and the ones after the first do not wait for the read still under way
// (apps/services/admission-flow.ts; the rule itself: test/admission-flow-unanswered-reads.unit.test.ts).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import * as assert from 'uvu/assert';
import { startRelay, type RunningRelay } from '../apps/relay.ts';
import { EVENTS_TOPIC_PARTITIONS, eventsTopic } from '../apps/pipeline/topics.ts';
import { loadConfig } from '../infra/config.ts';
import { KafkaLog } from '../infra/kafka/log.ts';
import { waitUntil } from './support/eventually.ts';
import { parseMetrics, samplesOf } from './support/metrics.ts';
import { postEmail, runRelay } from './support/relay-process.ts';
import { startPrivateKafka, type PrivateEngine } from './support/private-engine.ts';
import { skippableSuite } from './support/skippable-suite.ts';

const test = skippableSuite('admission flow control while Kafka is down', process.env.RELAY_KAFKA_BROKERS ? undefined : 'the engines are not installed here (eval "$(bash infra/engines/engines.sh up)")');

test('sends while the broker is down are answered within maxWaitMs (1 s) plus slack, not after kafkajs gives up', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-flow-kafka-down-'));
  let kafka: PrivateEngine | null = null;
  let relay: RunningRelay | null = null;
  try {
    kafka = await startPrivateKafka();
    const namespace = `flow_${randomUUID().slice(0, 8)}`;
    // The topic a forwarder would have made: the backlog can be read while the broker is up.
    const log = await KafkaLog.connect([kafka.address], { logLevel: 'nothing' });
    await log.ensureTopic(eventsTopic(namespace), EVENTS_TOPIC_PARTITIONS);
    await log.close();
    const env = {
      RELAY_DATA_DIR: dataDir, PORT: '0', RELAY_INBOUND_SMTP_PORT: '0', RELAY_LOG_LEVEL: 'error',
      RELAY_LOG_NAMESPACE: namespace, RELAY_KAFKA_BROKERS: kafka.address,
      // A separate `relay api` told which groups to watch (the default of `relay start` watches these too).
      RELAY_ADMISSION_BACKLOG_GROUPS: 'projector,sender',
    };
    const setup = await runRelay(['setup', '--json', '--trust-domain', '--email', 'ops@example.test', '--password', 'a long enough password', '--domain', 'example.test'], env);
    assert.is(setup.code, 0, setup.stderr);
    const apiKey = JSON.parse(setup.stdout).apiKey as string;
    relay = await startRelay(loadConfig(env), ['api']);
    const url = relay.url!;
    const running = relay;
    // Flow control reads the backlog while the broker is up (its gauge gets a value).
    await waitUntil(async () => {
      await postEmail(url, apiKey, { from: 'hello@example.test', to: 'you@example.test', subject: 'hi', text: 'hi' });
      return samplesOf(parseMetrics(await running.metrics.render()), 'relay_admission_backlog_records').length > 0;
    }, 'a backlog read while Kafka is up', 20_000);

    await kafka.halt();
    // Given 3 s each (maxWaitMs 1 s plus slack) to answer.
    for (const n of [1, 2, 3]) {
      const started = performance.now();
      const answer = await fetch(`${url}/v1/emails`, {
        method: 'POST', signal: AbortSignal.timeout(3_000),
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ from: 'hello@example.test', to: 'you@example.test', subject: `during ${n}`, text: 'during' }),
      }).then((r) => r.status, (e: Error) => e.name);
      const ms = performance.now() - started;
      assert.is(answer, 202, `send ${n} while Kafka was down: ${answer} after ${Math.round(ms)} ms (flow control's maxWaitMs is 1000 ms)`);
    }
  } finally {
    await relay?.stop().catch(() => {});
    await kafka?.stop().catch(() => {});
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test.run();
