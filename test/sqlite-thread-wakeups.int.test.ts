// `relay start` can run the pipeline on a thread of its own (RELAY_PIPELINE_THREAD=on): a write on one thread must wake the
// embedded stores' readers on the other at once. The readers here poll once a minute, so only
// a wake-up meets the test's deadline; the control shows that without wakeOtherThreads() in
// the writing thread nothing arrives in that time.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BroadcastChannel, Worker } from 'node:worker_threads';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { DatabaseSync } from 'node:sqlite';
import { changeSignal, waitForChange, wakeOtherThreads } from '../infra/sqlite/change-signal.ts';
import { SqliteEventStore } from '../infra/sqlite/event-store.ts';
import { SqliteLog } from '../infra/sqlite/log.ts';
import { settle, waitUntil } from './support/eventually.ts';

const test = suite('sqlite wake-ups across threads');
const dir = mkdtempSync(join(tmpdir(), 'relay-thread-wakeups-'));
const MINUTE = 60_000;
const WRITER = new URL('./fixtures/thread-writer.ts', import.meta.url);
const NOTIFIER = new URL('./fixtures/thread-notifier.ts', import.meta.url);

wakeOtherThreads();
const events = new SqliteEventStore(join(dir, 'events.db'), { pollIntervalMs: MINUTE });
const log = new SqliteLog(join(dir, 'log.db'), { pollIntervalMs: MINUTE });
const streams: string[] = [];
const records: string[] = [];
let stopReaders: () => Promise<void> = async () => {};

test.before(async () => {
  await log.ensureTopic('wakeups', 2);
  const subscription = events.subscribeAll({}, async (event) => void streams.push(event.streamId));
  const consumer = await log.consume({ group: 'g', topic: 'wakeups', handle: async (record) => void records.push(record.key) });
  stopReaders = async () => {
    await consumer.stop();
    await subscription.stop();
  };
  // Both have read what there is (nothing) and wait for a change, or for their minute.
  await settle(300);
});

test.after(async () => {
  await stopReaders();
  await events.close();
  await log.close();
  rmSync(dir, { recursive: true, force: true });
});

async function writeOnAnotherThread(name: string, wake: boolean): Promise<void> {
  const worker = new Worker(WRITER, { workerData: { dir, wake, name } });
  // Both listened for at once: a thread that ends right after posting can have its message and
  // its exit emitted in one go, before an exit listener added after the message would exist.
  const exited = new Promise((resolve) => worker.once('exit', resolve));
  const written = new Promise<void>((resolve, reject) => {
    worker.once('message', () => resolve());
    worker.once('error', reject);
  });
  await written;
  await exited;
}

test('without wakeOtherThreads in the writer, a reader on another thread waits for its poll', async () => {
  await writeOnAnotherThread('unannounced', false);
  await settle(1000);
  assert.not.ok(streams.includes('unannounced'), 'the subscription saw the event before its poll');
  assert.not.ok(records.includes('unannounced'), 'the consumer saw the record before its poll');
});

test('with it, an event appended and a record published on another thread reach this thread\'s readers at once', async () => {
  await writeOnAnotherThread('announced', true);
  await waitUntil(() => streams.includes('announced') && records.includes('announced'), 'both readers to see the writes', 10_000);
  // The wake-up also brings what was written before it, unannounced.
  assert.ok(streams.includes('unannounced') && records.includes('unannounced'));
});

test('a signal woken on another thread wakes only the same signal here, not every signal of the file', async () => {
  const file = join(dir, 'signals.db');
  const db = new DatabaseSync(file);
  // Names as the log's: NUL-separated (Node cuts a BroadcastChannel's name at a NUL).
  const topic = changeSignal(db, 'log-records\u0000events');
  const group = changeSignal(db, 'log-group\u0000sender\u0000events');
  const before = { topic: topic.version, group: group.version };
  const worker = new Worker(NOTIFIER, { workerData: { file, channels: ['log-records\u0000events'] } });
  await new Promise((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  await waitUntil(() => topic.version !== before.topic, 'the topic signal to be woken', 5_000);
  await settle(100);
  assert.is(group.version, before.group, 'the group signal was woken too');
  db.close();
});

// The signals of a file that moved in one turn travel as one message that names them.
test('signals woken together on another thread wake each of them here, and no other', async () => {
  const file = join(dir, 'signals-together.db');
  const db = new DatabaseSync(file);
  const names = ['es_events', 'log-group\u0000sender\u0000events', 'log-group\u0000emails\u0000events', 'log-group\u0000webhooks\u0000events'];
  const [events, sender, emails, webhooks] = names.map((name) => changeSignal(db, name));
  const before = [events, sender, emails, webhooks].map((signal) => signal.version);
  const worker = new Worker(NOTIFIER, { workerData: { file, channels: names.slice(0, 3) } });
  await new Promise((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  await waitUntil(() => events.version !== before[0] && sender.version !== before[1] && emails.version !== before[2], 'the three signals to be woken', 5_000);
  await settle(100);
  assert.is(webhooks.version, before[3], 'a signal that did not move was woken');
  db.close();
});

// A message wakes the thread it reaches: one goes out only for the signals another thread
// waits on. Changes of the others show in their versions, through memory the threads share.
test('another thread is sent only the signals it waits on; the others\' changes show in their versions', async () => {
  const file = join(dir, 'signals-waited.db');
  const db = new DatabaseSync(file);
  const [waited, unwaited] = ['log-group\u0000sender\u0000events', 'log-group\u0000emails\u0000events'].map((name) => changeSignal(db, name));
  const sent: string[][] = [];
  const observer = new BroadcastChannel(`relay-sqlite:${encodeURIComponent(file)}`);
  (observer as unknown as { unref(): void }).unref();
  observer.onmessage = (event) => void sent.push((event as { data: string[] }).data);
  try {
    const before = unwaited.version;
    const woken = waitForChange([{ signal: waited, version: waited.version }], MINUTE);
    const worker = new Worker(NOTIFIER, { workerData: { file, channels: ['log-group\u0000emails\u0000events', 'log-group\u0000sender\u0000events'] } });
    await new Promise((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
    await woken;
    await waitUntil(() => sent.length > 0, 'the message to be observed', 5_000);
    assert.equal(sent, [['log-group\u0000sender\u0000events']]);
    assert.is.not(unwaited.version, before, 'the change of the signal nobody waited on is not seen');
    // Taken before that change, its version makes a wait end at once, with no message.
    const started = Date.now();
    await waitForChange([{ signal: unwaited, version: before }], MINUTE);
    assert.ok(Date.now() - started < 1000);
  } finally {
    observer.close();
    db.close();
  }
});

// Readers compare a signal's version to tell what moved (a consumer rebalances when its group's
// members signal moves): no other signal's change may move it, however many signals there are.
test('with thousands of signals in a file, a change on another thread moves only its own signal\'s version', async () => {
  const file = join(dir, 'signals-many.db');
  const db = new DatabaseSync(file);
  const names = Array.from({ length: 3000 }, (_, i) => `log-group\u0000group-${i}\u0000events`);
  const signals = names.map((name) => changeSignal(db, name));
  const before = signals.map((signal) => signal.version);
  const worker = new Worker(NOTIFIER, { workerData: { file, channels: [names[1234]] } });
  await new Promise((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  await waitUntil(() => signals[1234].version !== before[1234], 'the notified signal to move', 5_000);
  const moved = names.filter((_, i) => signals[i].version !== before[i]);
  assert.equal(moved, [names[1234]]);
  db.close();
});

test.run();
