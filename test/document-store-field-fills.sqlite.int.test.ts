// How the embedded document store fills its field columns from the documents
// (infra/sqlite/field-fills.ts), on real files:
// - a rollback to a build from before the columns (before 60bf5a0, e.g. 48f12f1), which writes
//   `INSERT INTO t (id, v, doc)` and `UPDATE t SET v = v + 1, doc = ?` and puts its json_extract
//   expression indexes back, then an upgrade again: the columns it left NULL or stale are filled
//   again, in every table, and its indexes dropped. Reproduced end to end with 48f12f1 ↔ 11bb2b9:
//   emails sent during the rollback were missing from GET /v1/emails, suppressions added then from
//   the list, and retention and the webhook retries read stale expiresAt, status, nextAttemptAt;
// - the same from a file the columns' builds wrote before the format stamp, where an upgrade
//   since may have replaced the legacy indexes already: no stamp, every column is checked;
// - a fill goes in batches, each told (onFieldFill), and reads meanwhile see every document;
// - a fill cut short (the start's abort signal; a crash leaves the same: batches committed whole)
//   is finished by the next ensureIndexes, before the index is made;
// - a file stamped with a newer storage format is refused.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DatabaseSync } from 'node:sqlite';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openDatabase } from '../infra/sqlite/database.ts';
import { SqliteDocumentStore, type FieldFillReport } from '../infra/sqlite/document-store.ts';
import { FILL_BATCH_ROWS } from '../infra/sqlite/field-fills.ts';
import type { IndexSpec } from '../infra/ports/document-store.ts';

interface Item {
  _id: string;
  s: string;
}

interface Context {
  dir: string;
  path: string;
}

const test = suite<Context>('sqlite document store: filling field columns');

test.before.each((ctx) => {
  ctx.dir = mkdtempSync(join(tmpdir(), 'relay-field-fills-'));
  ctx.path = join(ctx.dir, 'relay.db');
});

test.after.each((ctx) => {
  rmSync(ctx.dir, { recursive: true, force: true });
});

const ids = (docs: Array<{ _id: string }>) => docs.map((d) => d._id).sort();
const byS = (): IndexSpec[] => [{ name: 'by_s', fields: [['s', 'asc']] }];

/** Runs `fn` on the file as a raw connection (what another build does, or what a test looks at). */
function raw<R>(path: string, fn: (db: DatabaseSync) => R): R {
  const db = openDatabase(path);
  try {
    return fn(db);
  } finally {
    db.close();
  }
}

/** What 48f12f1's start and writes do to a collection: its expression index, rows without the columns. */
function olderBuildWrites(db: DatabaseSync, table: string, writes: { indexes?: boolean; insert?: Array<[string, object]>; update?: Array<[string, object, number]> }): void {
  if (writes.indexes) {
    db.exec(`DROP INDEX IF EXISTS "${table}__by_s"`);
    db.exec(`CREATE INDEX "${table}__by_s" ON "${table}" (json_extract(doc, '$."s"'))`);
  }
  for (const [id, doc] of writes.insert ?? []) db.prepare(`INSERT INTO "${table}" (id, v, doc) VALUES (?, 1, ?)`).run(id, JSON.stringify(doc));
  for (const [id, doc, v] of writes.update ?? []) db.prepare(`UPDATE "${table}" SET v = v + 1, doc = ? WHERE id = ? AND v = ?`).run(JSON.stringify(doc), id, v);
}

/** The error `work` rejects with; fails the test when it resolves. */
async function rejection(work: Promise<unknown>): Promise<Error> {
  try {
    await work;
  } catch (error) {
    return error as Error;
  }
  assert.unreachable('it resolved');
  throw new Error('unreachable');
}

async function withStore<R>(path: string, options: ConstructorParameters<typeof SqliteDocumentStore>[1], fn: (store: SqliteDocumentStore) => Promise<R>): Promise<R> {
  const store = new SqliteDocumentStore(openDatabase(path), options);
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

test('rolled back to a build before the columns and upgraded again: what the older build wrote is found, in every table', async ({ path }) => {
  // 1. This build: columns, indexes on them, a document in each collection.
  await withStore(path, {}, async (store) => {
    for (const name of ['items', 'later']) {
      await store.collection<Item>(name).ensureIndexes(byS());
      await store.collection<Item>(name).insert({ _id: 'before', s: 'a' });
    }
  });
  // 2. Rolled back: the older build indexes `items` its way (`later` is a collection it does
  //    not index: its index came after it), and writes to both.
  raw(path, (db) => {
    olderBuildWrites(db, 'doc_items', { indexes: true, insert: [['during', { s: 'a' }]], update: [['before', { s: 'b' }, 1]] });
    olderBuildWrites(db, 'doc_later', { insert: [['during', { s: 'a' }]], update: [['before', { s: 'b' }, 1]] });
  });
  // 3. This build again.
  const reports: FieldFillReport[] = [];
  await withStore(path, { onFieldFill: (report) => reports.push(report) }, async (store) => {
    for (const name of ['items', 'later']) {
      const collection = store.collection<Item>(name);
      await collection.ensureIndexes(byS());
      assert.equal(ids(await collection.find({ where: { s: 'a' } })), ['during'], `${name}: where s = a`);
      assert.equal(ids(await collection.find({ where: { s: 'b' } })), ['before'], `${name}: where s = b`);
      assert.is(await collection.count({ s: 'a' }), 1, name);
      assert.is(await collection.deleteWhere({ s: 'b' }), 1, `${name}: delete where s = b`);
    }
  });
  const repair = reports.find((report) => report.phase === 'repair');
  assert.equal(repair && { legacyIndexes: repair.legacyIndexes, tables: [...repair.tables].sort() }, { legacyIndexes: ['doc_items__by_s'], tables: ['doc_items', 'doc_later'] });
  assert.equal(reports.filter((report) => report.phase === 'done').map((report) => report.phase === 'done' && [report.table, report.updated]).sort(), [['doc_items', 2], ['doc_later', 2]]);
  // The index is this build's again, on the column.
  const index = raw(path, (db) => db.prepare(`SELECT sql FROM sqlite_master WHERE name = 'doc_items__by_s'`).get() as { sql: string });
  assert.match(index.sql, /"field:s"/);
  assert.not.match(index.sql, /json_extract/);
});

test('a file written before the format stamp has every column checked once, with no legacy index left to tell', async ({ path }) => {
  await withStore(path, {}, async (store) => {
    await store.collection<Item>('items').ensureIndexes(byS());
    await store.collection<Item>('items').insert({ _id: 'before', s: 'a' });
  });
  // A build of the columns from before the stamp, over a rollback whose legacy index it replaced already.
  raw(path, (db) => {
    db.exec('DROP TABLE IF EXISTS relay_storage_format');
    olderBuildWrites(db, 'doc_items', { insert: [['during', { s: 'a' }]], update: [['before', { s: 'b' }, 1]] });
  });
  await withStore(path, {}, async (store) => {
    const items = store.collection<Item>('items');
    await items.ensureIndexes(byS());
    assert.equal(ids(await items.find({ where: { s: 'a' } })), ['during']);
    assert.equal(ids(await items.find({ where: { s: 'b' } })), ['before']);
  });
  // Stamped now: the next start checks nothing.
  const reports: FieldFillReport[] = [];
  await withStore(path, { onFieldFill: (report) => reports.push(report) }, (store) => store.collection<Item>('items').ensureIndexes(byS()));
  assert.equal(reports, []);
});

/** `count` documents, half with s = 'a', in a collection with no index yet. */
async function unindexed(path: string, count: number): Promise<void> {
  await withStore(path, {}, async (store) => {
    const docs = Array.from({ length: count }, (_, i) => ({ _id: `d${String(i).padStart(6, '0')}`, s: i % 2 === 0 ? 'a' : 'b' }));
    await store.collection<Item>('items').insertMany!(docs);
  });
}

const nullColumns = (path: string) => raw(path, (db) => Number((db.prepare(`SELECT count(*) AS n FROM doc_items WHERE "field:s" IS NULL`).get() as { n: number }).n));

test('a column added over a few thousand documents is filled in batches, each told, and reads meanwhile find every document', async ({ path }) => {
  const count = FILL_BATCH_ROWS * 2 + FILL_BATCH_ROWS / 2;
  await unindexed(path, count);
  const reports: FieldFillReport[] = [];
  const duringFill: Array<{ unfilled: number; found: Promise<number> }> = [];
  const store: SqliteDocumentStore = new SqliteDocumentStore(openDatabase(path), {
    onFieldFill: (report) => {
      reports.push(report);
      // Between batches, the column half filled: a read must not go by it.
      if (report.phase === 'batch' && report.batch === 1) duringFill.push({ unfilled: nullColumns(path), found: store.collection<Item>('items').count({ s: 'a' }) });
    },
  });
  try {
    await store.collection<Item>('items').ensureIndexes(byS());
  } finally {
    await store.close();
  }
  assert.equal(reports.map((report) => report.phase), ['start', 'batch', 'batch', 'batch', 'done']);
  assert.equal(reports[0], { phase: 'start', table: 'doc_items', columns: ['field:s'], rows: count });
  assert.equal(reports.at(-1), { phase: 'done', table: 'doc_items', columns: ['field:s'], batches: 3, scanned: count, updated: count });
  assert.is(duringFill.length, 1);
  assert.is(duringFill[0].unfilled, count - FILL_BATCH_ROWS);
  assert.is(await duringFill[0].found, count / 2);
  assert.is(nullColumns(path), 0);
});

test('a fill cut short by the abort signal is finished by the next start before its index is made; reads see every document meanwhile', async ({ path }) => {
  const count = FILL_BATCH_ROWS * 3;
  await unindexed(path, count);
  const stop = new AbortController();
  const first: FieldFillReport[] = [];
  await withStore(path, {
    abandon: stop.signal,
    onFieldFill: (report) => {
      first.push(report);
      if (report.phase === 'batch') stop.abort(new Error('stopping'));
    },
  }, async (opened) => {
    const items = opened.collection<Item>('items');
    assert.is((await rejection(items.ensureIndexes(byS()))).message, 'stopping');
    assert.is(await items.count({ s: 'a' }), count / 2, 'read after the stop');
  });
  assert.equal(first.map((report) => report.phase), ['start', 'batch', 'stopped']);
  // What a crash after the first batch leaves too: the rest unfilled, no index.
  assert.is(nullColumns(path), count - FILL_BATCH_ROWS);
  assert.is(raw(path, (db) => db.prepare(`SELECT 1 FROM sqlite_master WHERE name = 'doc_items__by_s'`).get()), undefined);

  const next: FieldFillReport[] = [];
  await withStore(path, { onFieldFill: (report) => next.push(report) }, async (opened) => {
    const items = opened.collection<Item>('items');
    await items.ensureIndexes(byS());
    assert.is(await items.count({ s: 'a' }), count / 2);
    assert.is((await items.find({ where: { s: 'b' } })).length, count / 2);
  });
  assert.equal(next.at(-1), { phase: 'done', table: 'doc_items', columns: ['field:s'], batches: 3, scanned: count, updated: count - FILL_BATCH_ROWS });
  assert.is(nullColumns(path), 0);
  const plan = raw(path, (db) => db.prepare(`EXPLAIN QUERY PLAN SELECT id FROM doc_items WHERE "field:s" = 'a'`).all() as Array<{ detail: string }>);
  assert.ok(plan.some((step) => step.detail.includes('doc_items__by_s')), JSON.stringify(plan));
});

test('a file stamped with a newer storage format is refused, saying so', async ({ path }) => {
  await withStore(path, {}, (store) => store.collection<Item>('items').ensureIndexes(byS()));
  // As a build of format 99 would stamp it.
  raw(path, (db) => {
    db.exec('CREATE TABLE IF NOT EXISTS relay_storage_format (store TEXT PRIMARY KEY NOT NULL, format INTEGER NOT NULL)');
    db.exec(`INSERT INTO relay_storage_format (store, format) VALUES ('documents', 99) ON CONFLICT (store) DO UPDATE SET format = 99`);
  });
  await withStore(path, {}, async (store) => {
    assert.match((await rejection(store.collection<Item>('items').ensureIndexes(byS()))).message, /newer version of Relay \(storage format 99;/);
  });
});

test.run();
