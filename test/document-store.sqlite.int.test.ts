// The document store contract on the embedded SQLite adapter, plus what only the
// embedded adapter promises: several stores (connections) on one file see each other.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { Stored } from '../infra/ports/document-store.ts';
import { openDatabase } from '../infra/sqlite/database.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';
import { documentStoreContract } from './contracts/document-store.contract.ts';

const dir = mkdtempSync(join(tmpdir(), 'relay-docstore-'));

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
  rmSync(dir, { recursive: true, force: true });
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
