// The document store contract on the embedded SQLite adapter, plus what only the
// embedded adapter promises: several stores (connections) on one file see each other.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { DuplicateKeyError, type Stored } from '../infra/ports/document-store.ts';
import { openDatabase } from '../infra/sqlite/database.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';
import { documentStoreContract } from './contracts/document-store.contract.ts';

const dir = mkdtempSync(join(tmpdir(), 'relay-docstore-'));
// Removed at exit: the suites below run one after another, each making files in it.
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));

documentStoreContract('sqlite', async () => {
  const store = new SqliteDocumentStore(join(dir, 'contract.db'));
  return { store, close: () => store.close() };
});

interface Counter {
  _id: string;
  value: number;
}

const shared = suite('sqlite document store: two connections on one file');
const file = join(dir, 'shared.db');
let first: SqliteDocumentStore;
let second: SqliteDocumentStore;

shared.before(() => {
  first = new SqliteDocumentStore(file);
  second = new SqliteDocumentStore(file);
});

shared.after(async () => {
  await first.close();
  await second.close();
});

shared('each sees the other\'s writes', async () => {
  await first.collection<Counter>('counters').insert({ _id: 'c', value: 1 });
  assert.equal(await second.collection<Counter>('counters').get('c'), { _id: 'c', value: 1, _v: 1 });
  await second.collection<Counter>('counters').replace({ _id: 'c', value: 2 }, 1);
  assert.equal(await first.collection<Counter>('counters').find({ where: { value: 2 } }), [{ _id: 'c', value: 2, _v: 2 }]);
});

shared('compare-and-set holds across connections', async () => {
  const a = first.collection<Counter>('cas');
  const b = second.collection<Counter>('cas');
  await a.insert({ _id: 'n', value: 0 });
  const results = await Promise.all(
    Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? a : b).replace({ _id: 'n', value: i + 1 }, 1)),
  );
  const winners = results.filter((r): r is Stored<Counter> => r !== null);
  assert.is(winners.length, 1);
  assert.is(await b.replace({ _id: 'n', value: -1 }, 1), null);
  const next = await b.replace({ _id: 'n', value: winners[0].value + 100 }, 2);
  assert.equal(await a.get('n'), next);
  assert.is(await a.replace({ _id: 'n', value: 0 }, 2), null);
});

shared('a unique index made through one connection binds the other', async () => {
  await first.collection<Counter>('uniq').ensureIndexes([{ name: 'by_value', fields: [['value', 'asc']], unique: true }]);
  await second.collection<Counter>('uniq').insert({ _id: 'a', value: 1 });
  try {
    await first.collection<Counter>('uniq').insert({ _id: 'b', value: 1 });
    assert.unreachable('duplicate accepted');
  } catch (err) {
    assert.is((err as { index?: string }).index, 'by_value');
  }
});

shared('a drop and rename by one connection is seen by the other', async () => {
  const seenBySecond = second.collection<Counter>('swap_live');
  await seenBySecond.insert({ _id: 'old', value: 1 });
  assert.is(await seenBySecond.count(), 1);
  // The second connection writes the source first, so it knows that table to exist...
  await second.collection<Counter>('swap_rebuilt').insert({ _id: 'new', value: 2 });
  await first.rename('swap_rebuilt', 'swap_live');
  assert.equal(ids(await seenBySecond.find()), ['new']);
  // ...which the rename made false: reads see it empty and writes recreate it.
  assert.is(await second.collection<Counter>('swap_rebuilt').count(), 0);
  await second.collection<Counter>('swap_rebuilt').insert({ _id: 'again', value: 3 });
  assert.equal(ids(await first.collection<Counter>('swap_rebuilt').find()), ['again']);
  await first.drop('swap_live');
  assert.is(await seenBySecond.count(), 0);
  await seenBySecond.insert({ _id: 'fresh', value: 4 });
  assert.equal(await first.collection<Counter>('swap_live').get('fresh'), { _id: 'fresh', value: 4, _v: 1 });
});

shared('a shared connection stays open when the store closes', async () => {
  const db = openDatabase(join(dir, 'borrowed.db'));
  const borrowing = new SqliteDocumentStore(db);
  await borrowing.collection<Counter>('c').insert({ _id: 'x', value: 1 });
  await borrowing.close();
  assert.is(await borrowing.ping(), false);
  assert.equal({ ...db.prepare(`SELECT count(*) AS n FROM sqlite_master WHERE type = 'table'`).get() }, { n: 1 });
  db.close();
});

function ids(docs: Array<{ _id: string }>): string[] {
  return docs.map((d) => d._id);
}

shared.run();

// What an index names is kept in a column of its own (infra/sqlite/field-columns.ts); the
// answers must be the ones the documents give without it.
const columns = suite('sqlite document store: indexed fields in columns');

interface Item {
  _id: string;
  s?: string | null;
  n?: number;
  b?: boolean;
  tags?: string[];
  nested?: { x: number };
  note?: string;
}

const ITEMS: Item[] = [
  { _id: 'i1', s: 'a', n: 1, b: true, tags: ['x', 'y'], nested: { x: 3 } },
  { _id: 'i2', s: 'b', n: 2.5, b: false, tags: ['y'], nested: { x: 1 } },
  { _id: 'i3', s: null, n: 2, tags: [] },
  { _id: 'i4', n: 10, b: true, nested: { x: 2 } },
  { _id: 'i5', s: 'a', n: -1, b: false },
  { _id: 'i6', s: '1', n: 1 },
];

columns('finds over fields held in columns answer as finds over the documents do', async () => {
  const store = new SqliteDocumentStore(join(dir, 'columns-equivalence.db'));
  try {
    const plain = store.collection<Item>('plain');
    const indexed = store.collection<Item>('indexed');
    await indexed.ensureIndexes([
      { name: 's_n', fields: [['s', 'asc'], ['n', 'desc']] },
      { name: 'b', fields: [['b', 'asc'], ['_id', 'asc']] },
      { name: 'nested', fields: [['nested.x', 'asc']] },
      { name: 'tags', fields: [['tags', 'asc']] },
    ]);
    for (const item of ITEMS) {
      await plain.insert(item);
      await indexed.insert(item);
    }
    const finds: Array<Parameters<typeof plain.find>[0]> = [
      { where: { s: 'a' } }, { where: { s: null } }, { where: { s: { ne: 'a' } } }, { where: { s: { in: ['b', null] } } },
      { where: { s: '1' } }, { where: { n: 1 } }, { where: { n: { gt: 1, lte: 10 } } }, { where: { n: { lt: 2 } } },
      { where: { b: true } }, { where: { b: false } }, { where: { b: { ne: true } } }, { where: { 'nested.x': { gte: 2 } } },
      { where: { tags: { contains: 'y' } } }, { where: { s: 'a', n: { lt: 5 } } },
      { orderBy: [['s', 'asc'], ['n', 'desc']] }, { orderBy: [['b', 'desc'], ['_id', 'asc']], limit: 4 },
      { orderBy: [['nested.x', 'asc'], ['_id', 'asc']] },
      { orderBy: [['s', 'asc'], ['_id', 'asc']], after: { s: 'a', _id: 'i1' } },
      { orderBy: [['n', 'desc'], ['_id', 'asc']], after: { n: 2, _id: 'i3' }, limit: 2 },
    ];
    // Without an order the rows come in whichever order the plan reads them.
    const found = async (collection: typeof plain, options: (typeof finds)[number]) => {
      const docs = await collection.find(options);
      return options?.orderBy ? docs : docs.sort((x, y) => x._id.localeCompare(y._id));
    };
    for (const options of finds) {
      const label = JSON.stringify(options);
      assert.equal(await found(indexed, options), await found(plain, options), label);
      if (!options?.orderBy) assert.is(await indexed.count(options?.where), await plain.count(options?.where), label);
    }
    // Updates, the indexed fields changed or not, and deletions by a condition on them.
    for (const collection of [plain, indexed]) {
      const i1 = (await collection.get('i1'))!;
      await collection.replace({ ...i1, s: 'c', note: 'moved' }, i1._v);
      const i2 = (await collection.get('i2'))!;
      await collection.replace({ ...i2, note: 'same fields' }, i2._v);
      const i4 = (await collection.get('i4'))!;
      const { b, ...withoutB } = i4;
      void b;
      await collection.replace({ ...withoutB, s: 'a' }, i4._v);
      await collection.deleteWhere({ n: { lt: 0 } });
    }
    for (const options of finds) assert.equal(await found(indexed, options), await found(plain, options), `after the updates: ${JSON.stringify(options)}`);
    assert.equal(ids(await indexed.find({ where: { s: 'c' } })), ['i1']);
    assert.equal(ids(await indexed.find({ where: { s: 'a' } })), ['i4']);
    assert.equal(ids(await indexed.find({ where: { b: true } })), ['i1'], 'i4 lost its b');
  } finally {
    await store.close();
  }
});

columns('a unique field in a column refuses a taken value on replace and keeps the document as it was', async () => {
  const store = new SqliteDocumentStore(join(dir, 'columns-unique.db'));
  try {
    const items = store.collection<Item>('unique');
    await items.ensureIndexes([{ name: 'by_s', fields: [['s', 'asc']], unique: true }]);
    await items.insert({ _id: 'a', s: 'one' });
    const b = await items.insert({ _id: 'b', s: 'two' });
    await items.replace({ _id: 'b', s: 'one' }, b._v).then(() => assert.unreachable('taken value accepted'), (error: { index?: string }) => assert.is(error.index, 'by_s'));
    assert.equal(await items.find({ where: { s: 'two' } }), [b]);
  } finally {
    await store.close();
  }
});

columns('a table from before the columns gets them, filled, and its indexes move onto them', async () => {
  const path = join(dir, 'columns-upgrade.db');
  const old = openDatabase(path);
  old.exec(`CREATE TABLE doc_legacy (id TEXT PRIMARY KEY NOT NULL, v INTEGER NOT NULL, doc TEXT NOT NULL)`);
  old.exec(`CREATE INDEX doc_legacy__by_s ON doc_legacy (json_extract(doc, '$."s"'))`);
  const insert = old.prepare('INSERT INTO doc_legacy (id, v, doc) VALUES (?, 1, ?)');
  for (const { _id, ...body } of ITEMS) insert.run(_id, JSON.stringify(body));
  old.close();
  const store = new SqliteDocumentStore(openDatabase(path));
  try {
    const legacy = store.collection<Item>('legacy');
    await legacy.ensureIndexes([{ name: 'by_s', fields: [['s', 'asc']] }]);
    assert.equal(ids(await legacy.find({ where: { s: 'a' } })), ['i1', 'i5']);
    const check = openDatabase(path);
    try {
      const index = check.prepare(`SELECT sql FROM sqlite_master WHERE name = 'doc_legacy__by_s'`).get() as { sql: string };
      assert.match(index.sql, '"field:s"');
      const plan = check.prepare(`EXPLAIN QUERY PLAN SELECT id FROM doc_legacy WHERE "field:s" = 'a'`).all() as Array<{ detail: string }>;
      assert.match(plan.map((p) => p.detail).join(' '), 'doc_legacy__by_s');
    } finally {
      check.close();
    }
  } finally {
    await store.close();
  }
});

columns('a column another connection adds is filled by this connection\'s next writes', async () => {
  const path = join(dir, 'columns-two-connections.db');
  const before = new SqliteDocumentStore(openDatabase(path));
  const adding = new SqliteDocumentStore(openDatabase(path));
  try {
    const mine = before.collection<Item>('late');
    const first = await mine.insert({ _id: 'first', s: 'x' });
    // The other connection (another process, as far as this one can tell) indexes the field.
    await adding.collection<Item>('late').ensureIndexes([{ name: 'by_s', fields: [['s', 'asc']] }]);
    await mine.insert({ _id: 'second', s: 'y' });
    await mine.replace({ _id: 'first', s: 'y' }, first._v);
    assert.equal(ids(await adding.collection<Item>('late').find({ where: { s: 'y' }, orderBy: [['_id', 'asc']] })), ['first', 'second']);
    assert.equal(await adding.collection<Item>('late').find({ where: { s: 'x' } }), []);
  } finally {
    await before.close();
    await adding.close();
  }
});

columns('a read whose columns have gone (the table dropped and made again elsewhere) looks at the schema again', async () => {
  const path = join(dir, 'columns-made-again.db');
  const reading = new SqliteDocumentStore(openDatabase(path));
  const other = new SqliteDocumentStore(openDatabase(path));
  try {
    const mine = reading.collection<Item>('again');
    await mine.ensureIndexes([{ name: 'by_s', fields: [['s', 'asc']] }]);
    await mine.insert({ _id: 'old', s: 'a' });
    assert.equal(ids(await mine.find({ where: { s: 'a' } })), ['old']);
    assert.is(await mine.count({ s: 'a' }), 1);
    // Within READ_RECHECK_MS this connection's reads still go by the column it saw.
    await other.drop('again');
    await other.collection<Item>('again').insert({ _id: 'new', s: 'a', n: 1 });
    assert.equal(ids(await mine.find({ where: { s: 'a' } })), ['new']);
    assert.equal(await mine.find({ where: { s: 'a' }, fields: ['n'] }), [{ _id: 'new', n: 1, _v: 1 }]);
    assert.is(await mine.count({ s: 'a' }), 1);
    // A column added elsewhere and not seen yet: the read takes the value from the document.
    await other.collection<Item>('again').ensureIndexes([{ name: 'by_n', fields: [['n', 'asc']] }]);
    await other.collection<Item>('again').insert({ _id: 'newer', s: 'b', n: 2 });
    assert.equal(ids(await mine.find({ where: { n: { gte: 1 } }, orderBy: [['n', 'desc']] })), ['newer', 'new']);
  } finally {
    await reading.close();
    await other.close();
  }
});

columns('a unique index refused on duplicates takes its column back: the writes after it in the batch go on', async () => {
  const store = new SqliteDocumentStore(join(dir, 'columns-refused-index.db'));
  try {
    const items = store.collection<Item>('refused');
    await items.insert({ _id: 'a', s: 'same' });
    await items.insert({ _id: 'b', s: 'same' });
    // One turn: both join one batch, the index first.
    const [indexed, inserted] = await Promise.allSettled([
      items.ensureIndexes([{ name: 'by_s', fields: [['s', 'asc']], unique: true }]),
      items.insert({ _id: 'c', s: 'other' }),
    ]);
    assert.instance((indexed as PromiseRejectedResult).reason, DuplicateKeyError);
    assert.is(inserted.status, 'fulfilled', String((inserted as PromiseRejectedResult).reason));
    assert.equal(ids(await items.find({ where: { s: 'other' } })), ['c']);
  } finally {
    await store.close();
  }
});

columns.run();
