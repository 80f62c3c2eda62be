// Group commit on the embedded stores: concurrent writes share one transaction (one fsync),
// each write stays all-or-nothing on its own, and nobody sees or is told about a write
// before its batch is committed.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { DuplicateKeyError } from '../infra/ports/document-store.ts';
import { deferDurability } from '../infra/ports/durability.ts';
import { WrongExpectedRevisionError } from '../infra/ports/event-store.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';
import { SqliteEventStore } from '../infra/sqlite/event-store.ts';
import { GroupCommit } from '../infra/sqlite/group-commit.ts';
import { commitHoldSwitch } from './support/commit-hold.ts';
import { waitUntil } from './support/eventually.ts';

const test = suite('group commit');
const dir = mkdtempSync(join(tmpdir(), 'relay-group-commit-'));
let n = 0;
const file = () => join(dir, `store-${++n}.db`);
/** Every store and group commit of this file holds its commits through it. */
const holds = commitHoldSwitch();
const withHold = { commitHold: holds.hold };
/** One turn of the event loop: whatever can happen without the held commit or sync has happened. */
const turn = () => new Promise((resolve) => setImmediate(resolve));
const event = (type = 'Happened') => ({ id: randomUUID(), type, data: { n: Math.random() } });

/** Records the batches committed while `work` runs: their files' base names and sizes. */
async function batchesOf(work: () => Promise<unknown>): Promise<number[]> {
  const sizes: number[] = [];
  holds.set(async ({ writes, stage }) => void (stage === 'commit' && sizes.push(writes)));
  try {
    await work();
  } finally {
    holds.set(null);
  }
  return sizes;
}

test.after(() => rmSync(dir, { recursive: true, force: true }));

test('concurrent appends share one commit; a conflicting one fails alone', async () => {
  const store = new SqliteEventStore(file(), withHold);
  try {
    await store.append('s-taken', [event()], { expectedRevision: 'no_stream' });
    let outcomes: PromiseSettledResult<unknown>[] = [];
    const batches = await batchesOf(async () => {
      outcomes = await Promise.allSettled([
        store.append('s-1', [event(), event()], { expectedRevision: 'no_stream' }),
        store.append('s-taken', [event()], { expectedRevision: 'no_stream' }),
        store.append('s-2', [event()], { expectedRevision: 'no_stream' }),
        store.append('s-1', [event()], { expectedRevision: 1 }),
      ]);
    });
    assert.equal(batches, [4], 'one commit for the four appends');
    assert.equal(outcomes.map((o) => o.status), ['fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    assert.instance((outcomes[1] as PromiseRejectedResult).reason, WrongExpectedRevisionError);
    assert.equal((await store.readStream('s-1')).map((e) => e.revision), [0, 1, 2]);
    assert.is((await store.readStream('s-taken')).length, 1);
    assert.is((await store.readStream('s-2')).length, 1);
  } finally {
    await store.close();
  }
});

test('a write that fails half-way leaves nothing of itself and nothing of its neighbours undone', async () => {
  const store = new SqliteDocumentStore(file(), withHold);
  try {
    const items = store.collection<{ _id: string; email: string }>('items');
    await items.ensureIndexes([{ name: 'email', fields: [['email', 'asc']], unique: true }]);
    await items.insert({ _id: 'a', email: 'a@example.test' });
    const outcomes = await Promise.allSettled([
      items.insert({ _id: 'b', email: 'b@example.test' }),
      items.insert({ _id: 'c', email: 'a@example.test' }),
      items.insert({ _id: 'a', email: 'z@example.test' }),
      items.insert({ _id: 'd', email: 'd@example.test' }),
    ]);
    assert.equal(outcomes.map((o) => o.status), ['fulfilled', 'rejected', 'rejected', 'fulfilled']);
    assert.is(((outcomes[1] as PromiseRejectedResult).reason as DuplicateKeyError).index, 'email');
    assert.is(((outcomes[2] as PromiseRejectedResult).reason as DuplicateKeyError).index, '_id');
    assert.equal((await items.find({ orderBy: [['_id', 'asc']] })).map((d) => d._id), ['a', 'b', 'd']);
  } finally {
    await store.close();
  }
});

test('a one-statement write (no savepoint) that is refused leaves its neighbours in the batch alone', async () => {
  const db = new DatabaseSync(file());
  db.exec('PRAGMA journal_mode = WAL; CREATE TABLE t (id TEXT PRIMARY KEY)');
  const commits = new GroupCommit(db, { hold: holds.hold });
  const insert = db.prepare('INSERT INTO t (id) VALUES (?)');
  let outcomes: PromiseSettledResult<unknown>[] = [];
  const batches = await batchesOf(async () => {
    outcomes = await Promise.allSettled([
      commits.run(() => insert.run('a')),
      commits.runStatement(() => insert.run('a')),
      commits.runStatement(() => insert.run('b')),
    ]);
  });
  assert.equal(batches, [3]);
  assert.equal(outcomes.map((o) => o.status), ['fulfilled', 'rejected', 'fulfilled']);
  assert.equal((db.prepare('SELECT id FROM t ORDER BY id').all() as Array<{ id: string }>).map((r) => r.id), ['a', 'b']);
  db.close();
});

test('a one-statement write whose error ends the transaction (a full disk) fails its batch; the next write gets a batch of its own', async () => {
  const db = new DatabaseSync(file());
  db.exec('PRAGMA journal_mode = WAL; CREATE TABLE t (id TEXT PRIMARY KEY, body TEXT)');
  const { page_count: pages } = db.prepare('PRAGMA page_count').get() as { page_count: number };
  db.exec(`PRAGMA max_page_count = ${pages + 4}`);
  const commits = new GroupCommit(db, { hold: holds.hold });
  const insert = db.prepare('INSERT INTO t (id, body) VALUES (?, ?)');
  const outcomes = await Promise.allSettled([
    commits.run(() => insert.run('before', 'x')),
    commits.runStatement(() => insert.run('too big', 'y'.repeat(200_000))),
    commits.runStatement(() => insert.run('after', 'z')),
  ]);
  assert.equal(outcomes.map((o) => o.status), ['rejected', 'rejected', 'fulfilled']);
  assert.match(String((outcomes[1] as PromiseRejectedResult).reason), 'full');
  // 'after' ran in a transaction of its own, not in autocommit after the lost one.
  assert.equal((db.prepare('SELECT id FROM t').all() as Array<{ id: string }>).map((r) => r.id), ['after']);
  db.close();
});

test('a failed WAL sync stops the file\'s writes and durable reads for good, and the stores stop answering ping', async () => {
  const path = file();
  const events = new SqliteEventStore(path, withHold);
  const documents = new SqliteDocumentStore(path, withHold);
  try {
    await events.append('before', [event()], { expectedRevision: 'no_stream' });
    holds.set(async ({ stage }) => {
      if (stage === 'sync') throw Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' });
    });
    const failed = await events.append('lost', [event()], { expectedRevision: 'no_stream' }).then(() => null, (error: Error) => error);
    holds.set(null);
    assert.match(String(failed?.message), 'could not be synced (EIO');
    // /readyz shows the reason: the file by its name, no directory of the machine.
    assert.not.match(String(failed?.message), dirname(path));
    // The rows are committed (SQLite has them), but nothing may act on them: a durable read fails.
    await events.readAll().then(() => assert.unreachable('readAll answered after the failed sync'), (error: Error) => assert.match(error.message, 'could not be synced'));
    await events.readStream('before').then(() => assert.unreachable('readStream answered'), (error: Error) => assert.match(error.message, 'could not be synced'));
    const later = await Promise.allSettled([
      events.append('later', [event()], { expectedRevision: 'no_stream' }),
      documents.collection<{ _id: string }>('later').insert({ _id: 'x' }),
    ]);
    assert.equal(later.map((o) => o.status), ['rejected', 'rejected']);
    assert.is(await events.ping(), false);
    assert.is(await documents.ping(), false);
  } finally {
    holds.set(null);
    await documents.close().catch(() => {});
    await events.close().catch(() => {});
  }
  // A restart recovers the file as the disk holds it, and takes writes again.
  const reopened = new SqliteEventStore(path);
  try {
    assert.ok(await reopened.ping());
    await reopened.append('after-restart', [event()], { expectedRevision: 'no_stream' });
  } finally {
    await reopened.close();
  }
});

test('while a commit is held, readers do not see the write and its writer has no answer', async () => {
  const path = file();
  const store = new SqliteDocumentStore(path, withHold);
  const other = new SqliteDocumentStore(path, withHold);
  let release!: () => void;
  let held!: () => void;
  const holding = new Promise<void>((resolve) => (held = resolve));
  try {
    holds.set(({ stage }) => {
      if (stage !== 'commit') return Promise.resolve();
      held();
      return new Promise<void>((resolve) => (release = resolve));
    });
    let answered = false;
    const insert = store.collection<{ _id: string }>('held').insert({ _id: 'x' }).then(() => (answered = true));
    // The batch is at its COMMIT: whatever could answer without it has had its turn.
    await holding;
    await turn();
    assert.not.ok(answered);
    assert.is(await other.collection('held').get('x'), null, 'another store of this process reads committed data only');
    assert.is(await store.collection('held').get('x'), null, 'so does the writing store itself');
    holds.set(null);
    release();
    await insert;
    assert.ok(answered);
    assert.ok(await other.collection('held').get('x'));
  } finally {
    holds.set(null);
    await other.close();
    await store.close();
  }
});

test('a write is answered only after the WAL sync; until then the event store\'s readers wait too', async () => {
  const store = new SqliteEventStore(file(), withHold);
  let release!: () => void;
  let syncHeld!: () => void;
  const holding = new Promise<void>((resolve) => (syncHeld = resolve));
  holds.set(({ stage }) => {
    if (stage !== 'sync') return Promise.resolve();
    syncHeld();
    return new Promise<void>((resolve) => (release = resolve));
  });
  try {
    let appended = false;
    let read = false;
    const append = store.append('s-sync', [event()], { expectedRevision: 'no_stream' }).then(() => (appended = true));
    await holding;
    holds.set(null);
    const reading = store.readStream('s-sync').then((events) => {
      read = true;
      return events;
    });
    // The read is queued behind the held sync once its own statement had its turn.
    await turn();
    assert.not.ok(appended, 'the append was answered before its sync');
    assert.not.ok(read, 'a stream read returned a committed event before its sync');
    release();
    await append;
    assert.is((await reading).length, 1);
  } finally {
    holds.set(null);
    await store.close();
  }
});

test('a batch commits at its size bound without waiting for the turn to end', async () => {
  const db = new DatabaseSync(file());
  db.exec('CREATE TABLE t (v INTEGER)');
  const commits = new GroupCommit(db, { maxWrites: 3, hold: holds.hold });
  const insert = db.prepare('INSERT INTO t (v) VALUES (?)');
  const batches = await batchesOf(() => Promise.all(Array.from({ length: 7 }, (_, i) => commits.run(() => insert.run(i)))));
  assert.equal(batches, [3, 3, 1]);
  assert.is((db.prepare('SELECT count(*) AS n FROM t').get() as { n: number }).n, 7);
  db.close();
});

test('waiting for another connection\'s write lock does not block the event loop', async () => {
  const path = file();
  const other = new DatabaseSync(path);
  other.exec('PRAGMA journal_mode = WAL; CREATE TABLE t (v INTEGER)');
  const db = new DatabaseSync(path);
  const commits = new GroupCommit(db, { hold: holds.hold });
  const insert = db.prepare('INSERT INTO t (v) VALUES (?)');
  other.exec('BEGIN IMMEDIATE');
  let ticks = 0;
  const ticker = setInterval(() => ticks++, 5);
  let done = false;
  const written = commits.run(() => insert.run(1)).finally(() => (done = true));
  await waitUntil(() => ticks >= 5, 'timers run while the write waits', 5_000);
  assert.not.ok(done, 'the write waited for the lock');
  other.exec('COMMIT');
  await written;
  clearInterval(ticker);
  assert.is((db.prepare('SELECT count(*) AS n FROM t').get() as { n: number }).n, 1);
  db.close();
  other.close();
});

test('a failed COMMIT fails every write of its batch, successes included', async () => {
  const db = new DatabaseSync(file());
  db.exec('CREATE TABLE t (v INTEGER)');
  const commits = new GroupCommit(db, { hold: holds.hold });
  const insert = db.prepare('INSERT INTO t (v) VALUES (?)');
  holds.set(async ({ stage }) => {
    if (stage === 'commit') throw new Error('disk on fire');
  });
  try {
    const outcomes = await Promise.allSettled([commits.run(() => insert.run(1)), commits.run(() => insert.run(2))]);
    assert.equal(outcomes.map((o) => o.status), ['rejected', 'rejected']);
  } finally {
    holds.set(null);
  }
  assert.is((db.prepare('SELECT count(*) AS n FROM t').get() as { n: number }).n, 0);
  await commits.run(() => insert.run(3));
  assert.is((db.prepare('SELECT count(*) AS n FROM t').get() as { n: number }).n, 1);
  db.close();
});

test('in a deferred-durability scope, writes in sequence share one commit and the scope answers after its sync', async () => {
  const eventsFile = file();
  const events = new SqliteEventStore(eventsFile, withHold);
  const documents = new SqliteDocumentStore(file(), withHold);
  const items = documents.collection<{ _id: string }>('items');
  await items.insert({ _id: 'seed' });
  const stages: string[] = [];
  let releaseSync: () => void = () => {};
  holds.set(({ file: held, stage }) => {
    stages.push(`${stage} ${held === eventsFile ? 'events' : 'documents'}`);
    if (stage === 'sync' && held === eventsFile) return new Promise<void>((resolve) => (releaseSync = resolve));
    return Promise.resolve();
  });
  try {
    let answered = false;
    const command = deferDurability(async () => {
      // Each write is awaited before the next starts, as in an admission.
      await items.insert({ _id: 'one' });
      await items.insert({ _id: 'two' });
      await events.append('s-scope', [event()], { expectedRevision: 'no_stream' });
      await events.append('s-scope', [event()], { expectedRevision: 0 });
      return 'done';
    }).then((value) => {
      answered = true;
      return value;
    });
    await waitUntil(() => stages.includes('sync events'), 'the events file\'s sync is held');
    await turn();
    assert.equal(stages.filter((s) => s.startsWith('commit')).sort(), ['commit documents', 'commit events'], 'one commit per file for the four writes');
    assert.not.ok(answered, 'the scope answered before the events file was synced');
    releaseSync();
    assert.is(await command, 'done');
    assert.is((await events.readStream('s-scope')).length, 2);
  } finally {
    holds.set(null);
    releaseSync();
    await events.close();
    await documents.close();
  }
});

test('in a scope, a refused write still waits for its batch, and a lost batch fails the scope whatever the command answered', async () => {
  const documents = new SqliteDocumentStore(file(), withHold);
  const items = documents.collection<{ _id: string }>('items');
  await items.insert({ _id: 'taken' });
  let commitsSeen = 0;
  holds.set(async ({ stage }) => {
    if (stage === 'commit') commitsSeen++;
  });
  try {
    const refused = await deferDurability(async () => {
      const duplicate = await items.insert({ _id: 'taken' }).then(() => null, (error: unknown) => error);
      return { duplicate, committedBefore: commitsSeen };
    });
    assert.instance(refused.duplicate, DuplicateKeyError);
    assert.is(refused.committedBefore, 1, 'the refusal came only after its batch was committed');
    // A compare-and-set that matches nothing is a refusal too, though it does not throw.
    const stale = await deferDurability(async () => {
      const missed = await items.replace({ _id: 'taken' }, 7);
      return { missed, committedBefore: commitsSeen };
    });
    assert.is(stale.missed, null);
    assert.is(stale.committedBefore, 2, 'the missed compare-and-set came only after its batch was committed');

    holds.set(async ({ stage }) => {
      if (stage === 'commit') throw new Error('disk on fire');
    });
    let inserted = false;
    const lost = await deferDurability(async () => {
      await items.insert({ _id: 'lost' });
      inserted = true;
      return 'accepted';
    }).then((value) => value, (error: Error) => `failed: ${error.message}`);
    assert.ok(inserted, 'the write was given to the command at once');
    assert.is(lost, 'failed: disk on fire');
    assert.is(await items.get('lost'), null);

    // The batch fails while the command is still at work on later steps (an admission goes on
    // for several turns after its first writes): the scope asks only afterwards, and still fails.
    let failedCommits = 0;
    holds.set(async ({ stage }) => {
      if (stage === 'commit') {
        failedCommits++;
        throw new Error('disk on fire');
      }
    });
    const lostEarlier = await deferDurability(async () => {
      await items.insert({ _id: 'lost-earlier' });
      await waitUntil(() => failedCommits === 1, 'its batch failed');
      holds.set(null);
      await new Promise((resolve) => setTimeout(resolve, 5));
      return 'accepted';
    }).then((value) => value, (error: Error) => `failed: ${error.message}`);
    assert.is(lostEarlier, 'failed: disk on fire');
    assert.is(await items.get('lost-earlier'), null);
  } finally {
    holds.set(null);
    await documents.close();
  }
});

test.run();
