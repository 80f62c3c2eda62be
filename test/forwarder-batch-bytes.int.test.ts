// The forwarder cuts its publishes by bytes as well as by count (apps/pipeline/forwarder.ts). On
// Kafka one partition's records of one produce request form one record batch, which the broker
// refuses over the topic's max.message.bytes; a batch of up to 500 events whatever their size was
// refused, and retried identically forever: nothing after it reached Kafka. Shown here, on Kafka
// (RELAY_KAFKA_BROKERS):
// - a backlog of 18 emails with 1 MiB bodies on one partition (over 16 MiB together) is forwarded;
// - on a topic that takes smaller records than Relay's (created beforehand with max.message.bytes
//   3 MiB), starting says so on stderr, a batch of 1 MiB events it refuses is published in
//   smaller parts, and a single event it can never take is logged at error level with its id,
//   stream and position (and in the forwarder's liveness), the forwarder staying on the event
//   before it.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startForwarder, type Forwarder } from '../apps/pipeline/forwarder.ts';
import { EVENTS_TOPIC_PARTITIONS, eventsTopic } from '../apps/pipeline/topics.ts';
import { KafkaLog } from '../infra/kafka/log.ts';
import { partitionForKey } from '../infra/sqlite/partitioner.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';
import { SqliteEventStore } from '../infra/sqlite/event-store.ts';
import { waitUntil } from './support/eventually.ts';

const brokers = process.env.RELAY_KAFKA_BROKERS?.split(',').map((b) => b.trim()).filter(Boolean) ?? [];
const MiB = 1024 * 1024;

interface Context {
  dir: string;
  events: SqliteEventStore;
  documents: SqliteDocumentStore;
  log: KafkaLog;
  namespace: string;
  errors: string[];
  /** The forwarder's log lines. */
  logged: Array<Record<string, any>>;
  forwarder?: Forwarder;
}

const test = suite<Context>('forwarder batches on Kafka, by bytes');

test.before.each(async (ctx) => {
  ctx.dir = mkdtempSync(join(tmpdir(), 'relay-fwd-bytes-'));
  ctx.events = new SqliteEventStore(join(ctx.dir, 'events.db'));
  ctx.documents = new SqliteDocumentStore(join(ctx.dir, 'documents.db'));
  ctx.log = await KafkaLog.connect(brokers, { logLevel: 'nothing' });
  ctx.namespace = `fwd-bytes-${randomUUID().slice(0, 8)}`;
  ctx.errors = [];
  ctx.logged = [];
  ctx.forwarder = undefined;
});

test.after.each(async (ctx) => {
  await ctx.forwarder?.stop();
  await ctx.log.close();
  await Promise.all([ctx.events.close(), ctx.documents.close()]);
  rmSync(ctx.dir, { recursive: true, force: true });
});

/** Stream ids (emails) whose key lands in partition 0 of the events topic. */
function streamsOnPartitionZero(count: number): string[] {
  const streams: string[] = [];
  for (let i = 0; streams.length < count; i++) {
    if (partitionForKey(`email-${i}`, EVENTS_TOPIC_PARTITIONS) === 0) streams.push(`email-${i}`);
  }
  return streams;
}

/** Appends one EmailAccepted-like event with a sealed body of `bytes` to each stream; their positions and ids. */
async function appendBodies(events: SqliteEventStore, streams: string[], bytes: number): Promise<Array<{ id: string; position: string }>> {
  const appended = [];
  for (const streamId of streams) {
    const id = randomUUID();
    appended.push({ id, position: (await events.append(streamId, [{ id, type: 'EmailAccepted', data: { sealed: 'A'.repeat(bytes) } }], { expectedRevision: 'any' })).position });
  }
  return appended;
}

/** What the code under `run` writes to stderr (also passed through). */
async function capturingStderr<T>(lines: string[], run: () => Promise<T>): Promise<T> {
  const write = process.stderr.write.bind(process.stderr);
  process.stderr.write = ((chunk: string | Uint8Array, ...rest: unknown[]) => {
    lines.push(String(chunk));
    return (write as (...args: unknown[]) => boolean)(chunk, ...rest);
  }) as typeof process.stderr.write;
  try {
    return await run();
  } finally {
    process.stderr.write = write;
  }
}

const start = (ctx: Context) => startForwarder({
  events: ctx.events, log: ctx.log, documents: ctx.documents, namespace: ctx.namespace, onError: (e) => ctx.errors.push(e.message),
  logger: pino({ level: 'debug' }, { write: (line: string) => void ctx.logged.push(JSON.parse(line)) }),
});
const refusedEvent = (ctx: Context) => ctx.logged.find((line) => line.level === 50 && line.msg.startsWith('forwarder: an event is larger than the log takes'));

(brokers.length > 0 ? test : test.skip)('a backlog of 18 emails with 1 MiB bodies on one partition is forwarded (not retried forever as one too-large batch)', async (ctx) => {
  const appended = await appendBodies(ctx.events, streamsOnPartitionZero(18), MiB);
  const last = appended.at(-1)!.position;
  const forwarder = ctx.forwarder = await start(ctx);
  await waitUntil(() => forwarder.position() === last || ctx.errors.length >= 3, 'the forwarder to publish the backlog or fail', 15_000).catch(() => {});
  assert.is(forwarder.position(), last, `the forwarder is stuck; its errors: ${[...new Set(ctx.errors)].join(' | ')}`);
});

(brokers.length > 0 ? test : test.skip)('on a topic of 3 MiB records: a warning at start, refused batches published in parts, a record it never takes reported with its id', async (ctx) => {
  const topic = eventsTopic(ctx.namespace);
  const small = await KafkaLog.connect(brokers, { logLevel: 'nothing', maxMessageBytes: 3 * MiB });
  try {
    await small.ensureTopic(topic, EVENTS_TOPIC_PARTITIONS);
  } finally {
    await small.close();
  }
  const [first, ...rest] = streamsOnPartitionZero(7);
  // Six 1 MiB events: one publish by count and bytes (under 8 MiB), over 3 MiB on one partition.
  const fitting = await appendBodies(ctx.events, rest, MiB);
  const [tooLarge] = await appendBodies(ctx.events, [first], 4 * MiB);
  const stderr: string[] = [];
  await capturingStderr(stderr, async () => {
    ctx.forwarder = await start(ctx);
    await waitUntil(() => refusedEvent(ctx) !== undefined, 'the forwarder to report the record it cannot publish', 15_000);
  });
  const forwarder = ctx.forwarder!;
  assert.ok(stderr.some((line) => line.includes(`WARN topic ${topic} has max.message.bytes ${3 * MiB}, below the ${16 * MiB} Relay needs`)), stderr.join(''));
  assert.is(forwarder.position(), fitting.at(-1)!.position, `the six 1 MiB events are not all forwarded: ${[...new Set(ctx.errors)].join(' | ')}`);
  assert.ok(ctx.errors.some((e) => e.includes(': The request included a message larger')), 'the batch of six was refused once at least');
  const report = refusedEvent(ctx)!;
  assert.is(report.part, 'forwarder');
  assert.is(report.eventId, tooLarge.id);
  assert.is(report.type, 'EmailAccepted');
  assert.is(report.streamId, first);
  assert.is(report.position, tooLarge.position);
  assert.match(report.err.message, /The request included a message larger/);
  assert.not.ok(JSON.stringify(report).includes('AAAA'), 'the event\'s data is not logged');
  await waitUntil(() => ctx.errors.filter((e) => e.includes(tooLarge.id)).length >= 3, 'the forwarder to retry the event');
  assert.is(ctx.logged.filter((line) => line.level === 50).length, 1, 'reported once, not at every retry');
  const status = forwarder.liveness.snapshot();
  assert.is(status.state, 'recovering');
  assert.match(status.error ?? '', tooLarge.id);
});

if (brokers.length === 0) console.log('skipped: RELAY_KAFKA_BROKERS not set (eval "$(bash infra/engines/engines.sh up)")');
test.run();
