// What only the embedded store's index over an array field promises (infra/sqlite/array-indexes.ts):
// its side table is kept by triggers, so a connection that has not looked at the schema since the
// index was made (another process, as far as it can tell) keeps it right with its writes, and
// answers `contains` from the documents meanwhile; a read that knew of a side table that has
// gone since (the index redefined, the collection dropped and made again elsewhere) looks again
// rather than answer from nothing. Each store here has a connection of its own, as processes do.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { IndexSpec } from '../infra/ports/document-store.ts';
import { openDatabase } from '../infra/sqlite/database.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';

interface Tagged {
  _id: string;
  group: string;
  tags: string[];
  n?: number;
}

const BY_TAG: IndexSpec = { name: 'by_tag', fields: [['group', 'asc'], ['tags', 'asc'], ['_id', 'asc']], arrayField: 'tags' };

const test = suite<{ dir: string }>('sqlite document store: an index over an array field, across connections');

test.before((ctx) => {
  ctx.dir = mkdtempSync(join(tmpdir(), 'relay-array-index-'));
});

test.after(({ dir }) => rmSync(dir, { recursive: true, force: true }));

const open = (path: string) => new SqliteDocumentStore(openDatabase(path));
const tagged = (store: SqliteDocumentStore, tag: string) => store.collection<Tagged>('items').find({ where: { group: 'g', tags: { contains: tag } }, orderBy: [['_id', 'asc']] })
  .then((docs) => docs.map((d) => d._id));

test('a connection that has not seen the index keeps it with its writes, and finds as the documents say', async ({ dir }) => {
  const path = join(dir, 'unseen.db');
  const writer = open(path);
  const indexer = open(path);
  try {
    await writer.collection<Tagged>('items').insert({ _id: 'a', group: 'g', tags: ['x'] });
    assert.equal(await tagged(writer, 'x'), ['a'], 'read once before the index, so this connection goes by that look for a while');
    await indexer.collection<Tagged>('items').ensureIndexes([BY_TAG]);
    await writer.collection<Tagged>('items').insert({ _id: 'b', group: 'g', tags: ['x', 'y'] });
    const a = (await writer.collection<Tagged>('items').get('a'))!;
    await writer.collection<Tagged>('items').replace({ ...a, tags: ['y'] }, a._v);
    assert.equal(await tagged(writer, 'x'), ['b']);
    assert.equal(await tagged(writer, 'y'), ['a', 'b']);
    assert.equal(await tagged(indexer, 'x'), ['b'], 'through the index');
    assert.equal(await tagged(indexer, 'y'), ['a', 'b'], 'through the index');
  } finally {
    await writer.close();
    await indexer.close();
  }
});

test('a read that knew of a side table gone since looks at the schema again, whatever replaced it', async ({ dir }) => {
  const path = join(dir, 'gone.db');
  const reader = open(path);
  const other = open(path);
  try {
    await reader.collection<Tagged>('items').ensureIndexes([BY_TAG]);
    await reader.collection<Tagged>('items').insert({ _id: 'a', group: 'g', tags: ['x'] });
    assert.equal(await tagged(reader, 'x'), ['a'], 'through the index, now known to this connection');
    // Redefined as a plain index elsewhere: the side table is dropped.
    await other.collection<Tagged>('items').ensureIndexes([{ name: BY_TAG.name, fields: BY_TAG.fields }]);
    assert.equal(await tagged(reader, 'x'), ['a'], 'not nothing');
    assert.is(await reader.collection<Tagged>('items').count({ group: 'g', tags: { contains: 'x' } }), 1);
    // The collection dropped and made again elsewhere, its index over other fields.
    await reader.collection<Tagged>('items').ensureIndexes([BY_TAG]);
    assert.equal(await tagged(reader, 'x'), ['a']);
    await other.drop('items');
    await other.collection<Tagged>('items').ensureIndexes([{ ...BY_TAG, fields: [['tags', 'asc'], ['n', 'asc']] }]);
    await other.collection<Tagged>('items').insert({ _id: 'b', group: 'g', tags: ['x'], n: 1 });
    assert.equal(await tagged(reader, 'x'), ['b']);
  } finally {
    await reader.close();
    await other.close();
  }
});

test.run();
