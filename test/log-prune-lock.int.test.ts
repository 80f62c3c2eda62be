// The embedded log's retention timer and another connection's write lock: the prune waits for
// the lock as every write of the group commit does (on a timer, the event loop free), a lock
// held past the busy timeout is a warning and the next turn tries again. It ran its DELETE on
// the writer connection directly: sqlite's busy handler froze the loop for 5 s, then 'database
// is locked' escaped the timer and ended the process. Every Relay process opens a log, so a
// write lock held that long elsewhere (an index built at start, a slow checkpoint) killed it.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openDatabase } from '../infra/sqlite/database.ts';
import { startFixture } from './support/fixture-process.ts';
import { waitUntil } from './support/eventually.ts';

const test = suite('embedded log retention timer and the write lock');

test('a write lock held 6 s elsewhere: the prune is a warning, the loop keeps turning, and the prune is done once the lock is free', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'relay-log-prune-'));
  const file = join(dir, 'relay.db');
  const db = openDatabase(file);
  db.exec('CREATE TABLE marks (who TEXT NOT NULL)');
  const relay = startFixture(new URL('./fixtures/log-prune.ts', import.meta.url), [file]);
  const records = () => (db.prepare('SELECT count(*) AS n FROM log_records').get() as { n: number }).n;
  const alive = () => {
    if (relay.child.exitCode !== null) throw new Error(`the process with a log ended (${relay.child.exitCode}): ${relay.stderr()}`);
  };
  try {
    await relay.waitForLine((line) => line === 'ready', 'the process with a log runs');
    assert.is(records(), 3);
    // Another connection (a thread here; another process alike) holds the write lock for 6 s.
    const holder = new Worker(new URL('./fixtures/lock-holder.ts', import.meta.url), { workerData: { file, wake: false, releaseAfterMs: 6_000 } });
    const released = new Promise((resolve) => holder.once('exit', resolve));
    await new Promise((resolve, reject) => {
      holder.once('message', resolve);
      holder.once('error', reject);
    });
    const ticksBefore = relay.lines.length;
    relay.child.stdin!.write('prune\n');
    await waitUntil(() => {
      alive();
      return relay.stderr().includes("the log's retention could not prune: database is locked");
    }, 'the prune that found the lock taken is reported', 15_000);
    await released;
    await waitUntil(() => {
      alive();
      return records() === 1;
    }, 'the prune is done once the lock is free (all but the partition\'s last record)', 10_000);
    const ticks = relay.lines.slice(ticksBefore).filter((line) => line.startsWith('tick ')).map((line) => Number(line.slice(5)));
    const longestGap = Math.max(...ticks.slice(1).map((at, i) => at - ticks[i]));
    assert.ok(ticks.length > 20 && longestGap < 2_000, `the event loop stopped for ${longestGap} ms (${ticks.length} ticks)`);
  } finally {
    relay.child.kill('SIGKILL');
    await relay.exited;
    db.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test.run();
