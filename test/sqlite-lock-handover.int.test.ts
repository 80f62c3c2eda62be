// Two threads of one process write the same sqlite file (with RELAY_PIPELINE_THREAD=on,
// `relay start`'s API and pipeline threads share relay.db). A writer that finds the write lock taken retries on a timer, and also
// as soon as the other thread's transaction ends. Here the timer's first retry is a minute
// away, so only that hand-over lets the waiting write land within the test's deadline; the
// control shows that a holder not sharing its wake-ups leaves the waiter to its timer, and
// that the waiter never sleeps in sqlite's busy handler.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { wakeOtherThreads } from '../infra/sqlite/change-signal.ts';
import { openDatabase } from '../infra/sqlite/database.ts';
import { GroupCommit } from '../infra/sqlite/group-commit.ts';
import { settle, waitUntil } from './support/eventually.ts';

const test = suite('sqlite write lock handed over between threads');
const dir = mkdtempSync(join(tmpdir(), 'relay-lock-handover-'));
const file = join(dir, 'relay.db');
const HOLDER = new URL('./fixtures/lock-holder.ts', import.meta.url);
const MINUTE = 60_000;

wakeOtherThreads();
const db = openDatabase(file);
db.exec('CREATE TABLE marks (who TEXT NOT NULL)');
const marks = () => (db.prepare('SELECT who FROM marks ORDER BY rowid').all() as Array<{ who: string }>).map((r) => r.who);

/** Writes the control left waiting; the hand-over of the next test lets them through. */
const pending: Array<{ done: () => boolean; result: Promise<unknown> }> = [];

test.after(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Starts a holder thread; resolves once it holds the lock, with a function that lets it go. */
async function holdLock(wake: boolean, releaseAfterMs?: number): Promise<{ release(): Promise<void> }> {
  const worker = new Worker(HOLDER, { workerData: { file, wake, releaseAfterMs } });
  // Listened for from the start: a thread that ends can emit its last message and its exit in one go.
  const exited = new Promise((resolve) => worker.once('exit', resolve));
  await new Promise((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  return {
    async release() {
      worker.postMessage('release');
      await exited;
    },
  };
}

/**
 * A writer with a group commit of its own whose lock retries are a minute apart. Its
 * connection is opened before the lock is taken (opening one waits for a held lock).
 */
function waitingWriter(): { write(who: string): { done: () => boolean; result: Promise<unknown> } } {
  const own = openDatabase(file);
  const commits = new GroupCommit(own, { lockRetryMs: { first: MINUTE, max: MINUTE } });
  return {
    write(who) {
      let done = false;
      const result = commits.run(() => own.prepare('INSERT INTO marks (who) VALUES (?)').run(who)).finally(() => {
        done = true;
        commits.dispose();
        own.close();
      });
      return { done: () => done, result };
    },
  };
}

test('a holder that does not share its wake-ups leaves the waiting writer to its timer', async () => {
  const writer = waitingWriter();
  // It lets go on its own after 300 ms: a writer that slept in sqlite's busy handler instead of
  // returning to its event loop would get the lock then, inside BEGIN, and land its write.
  const holder = await holdLock(false, 300);
  const write = writer.write('after-silent-holder');
  await settle(1300);
  assert.not.ok(write.done(), 'the write went through without a hand-over');
  await holder.release();
  assert.equal(marks(), ['holder']);
  // Taken up by the next test's hand-over.
  pending.push(write);
});

test('a holder on another thread that shares its wake-ups hands the lock over when its transaction ends', async () => {
  const writer = waitingWriter();
  const holder = await holdLock(true);
  const write = writer.write('after-holder');
  await settle(200);
  assert.not.ok(write.done(), 'the write went through while the lock was held');
  await holder.release();
  await waitUntil(() => write.done() && pending.every((w) => w.done()), 'the waiting writes to land', 10_000);
  await write.result;
  for (const w of pending) await w.result;
  assert.equal(marks().sort(), ['after-holder', 'after-silent-holder', 'holder', 'holder'].sort());
});

test.run();
