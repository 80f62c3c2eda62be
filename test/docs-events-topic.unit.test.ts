// What docs/analysing-events.md and docs/distributed.md say of Kafka's events topic is the topic
// Relay creates (infra/kafka/topic-config.ts, EVENTS_TOPIC_PARTITIONS) and what the event catalog
// states in its Kafka channel binding; and the consumers the analysts' page shows never have the
// broker create Relay's topic (auto-creation would give it the broker's partition count and
// retention for good): every kafkajs consumer in its code sets allowAutoTopicCreation: false,
// every Java consumer configuration allow.auto.create.topics=false.
// The topic's real configuration is checked on Kafka by test/events-topic-keeps-history.e2e.test.ts.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { asyncApiDocument } from '../apps/services/event-catalog.ts';
import { EVENTS_TOPIC_PARTITIONS } from '../apps/pipeline/topics.ts';
import { TOPIC_CLEANUP_POLICY, TOPIC_MAX_MESSAGE_BYTES, TOPIC_RETENTION_BYTES, TOPIC_RETENTION_MS } from '../infra/kafka/topic-config.ts';
import { blocksUnder, readDoc } from './support/doc-blocks.ts';

const test = suite('the events topic as the docs and the catalog state it');

const SECTION = 'Consuming the topic from Kafka';

test('the catalog\'s Kafka binding states the topic analysts are promised: 8 partitions, every event kept, records up to 16 MiB', () => {
  const doc = asyncApiDocument() as { channels: { events: { bindings: { kafka: Record<string, unknown> } } } };
  assert.equal(doc.channels.events.bindings.kafka, {
    partitions: 8,
    topicConfiguration: { 'cleanup.policy': ['delete'], 'retention.ms': -1, 'retention.bytes': -1, 'max.message.bytes': 16 * 1024 * 1024 },
    bindingVersion: '0.5.0',
  });
});

test('docs/analysing-events.md states the topic\'s partitions and configuration', () => {
  const doc = readDoc('docs/analysing-events.md');
  const section = doc.slice(doc.indexOf(`\n## ${SECTION}\n`), doc.indexOf('\n## ', doc.indexOf(`\n## ${SECTION}\n`) + 1));
  const flat = section.replace(/\s+/g, ' ');
  assert.ok(flat.includes(`${EVENTS_TOPIC_PARTITIONS} partitions`), 'the partition count');
  for (const setting of [`retention.ms=${TOPIC_RETENTION_MS}`, `retention.bytes=${TOPIC_RETENTION_BYTES}`, `cleanup.policy=${TOPIC_CLEANUP_POLICY}`, `max.message.bytes=${TOPIC_MAX_MESSAGE_BYTES}`]) {
    assert.ok(flat.includes(`\`${setting}\``), `states ${setting}`);
  }
  assert.ok(flat.includes('topicConfiguration'), 'points at the catalog\'s binding');
});

test('docs/distributed.md\'s table of the topic has Relay\'s values', () => {
  const doc = readDoc('docs/distributed.md');
  const start = doc.indexOf('\n## The events topic\n');
  assert.ok(start >= 0, 'a section "The events topic"');
  const section = doc.slice(start, doc.indexOf('\n## ', start + 1));
  const rows = new Map([...section.matchAll(/^\| ([^|]+?) \| ([^|]+?) \|/gm)].map((m) => [m[1], m[2]]));
  assert.is(rows.get('partitions'), String(EVENTS_TOPIC_PARTITIONS));
  assert.is(rows.get('`retention.ms`, `retention.bytes`'), `\`${TOPIC_RETENTION_MS}\`, \`${TOPIC_RETENTION_BYTES}\``);
  assert.is(rows.get('`cleanup.policy`'), `\`${TOPIC_CLEANUP_POLICY}\``);
  assert.is(rows.get('`max.message.bytes`'), `\`${TOPIC_MAX_MESSAGE_BYTES}\``);
});

test('the consumers docs/analysing-events.md shows turn topic auto-creation off', () => {
  const doc = readDoc('docs/analysing-events.md');
  const js = blocksUnder(doc, SECTION, 'js');
  const consumers = js.flatMap((block) => [...block.matchAll(/\.consumer\(\{([^}]*)\}\)/g)].map((m) => m[1]));
  assert.ok(consumers.length > 0, 'a kafkajs consumer is shown');
  for (const options of consumers) assert.match(options, /allowAutoTopicCreation: false/);
  const properties = blocksUnder(doc, SECTION, 'properties');
  assert.ok(properties.length > 0, 'a Java consumer configuration is shown');
  for (const block of properties) {
    assert.match(block, /^allow\.auto\.create\.topics=false$/m);
    assert.match(block, /^auto\.offset\.reset=earliest$/m, 'from the beginning, as the kafkajs example');
  }
});

test.run();
