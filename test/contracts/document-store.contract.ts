// The promises of infra/ports/document-store.ts, run against any adapter (embedded SQLite,
// MongoDB/FerretDB). Every test uses its own randomly named collections so the suite can
// share a database with other runs, and nothing here relies on one engine's quirks.
//
// Decided semantics the adapters must share:
// - Equality is typed: 10 does not match "10", true does not match 1.
// - Equality with null (and `in` holding null) matches documents where the field is null
//   or missing; `ne: null` matches those where it is present and not null. `ne: x`
//   matches documents that lack the field.
// - Unique indexes are only specified for documents that hold every indexed field with a
//   non-null value; whether documents lacking one collide is adapter-defined (SQLite: they
//   never do, i.e. sparse), so callers must not rely on it either way.
// - Scalar equality/ranges on array fields are not specified (MongoDB matches elements);
//   use `contains` for arrays.
// - `contains` only matches array fields, never a scalar field equal to the value.
// - Ordering across mixed JSON types is not specified. Missing and null sort as equal and
//   first ascending (last descending), and `after` cursors may hold null for them.
import { randomBytes } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import {
  DuplicateKeyError,
  type Collection,
  type Direction,
  type DocumentStore,
  type Scalar,
  type Stored,
  type Where,
} from '../../infra/ports/document-store.ts';

export type OpenDocumentStore = () => Promise<{ store: DocumentStore; close: () => Promise<void> }>;

interface Account {
  _id: string;
  email: string;
  name?: string;
}

interface Item {
  _id: string;
  n: number;
  s?: string;
  flag: boolean;
  tags: Array<string | number | boolean>;
  nested: { k: string; depth: number; labels: string[] };
  opt?: string | null;
}

interface Ranked {
  _id: string;
  group: string;
  rank: number;
}

async function rejectsDuplicate(work: Promise<unknown>, collection: string, index: string): Promise<void> {
  let caught: unknown;
  try {
    await work;
  } catch (err) {
    caught = err;
  }
  if (caught === undefined) assert.unreachable(`expected DuplicateKeyError on index ${index}`);
  assert.instance(caught, DuplicateKeyError);
  assert.is((caught as DuplicateKeyError).index, index);
  assert.is((caught as DuplicateKeyError).collection, collection);
}

function ids(docs: Array<{ _id: string }>): string[] {
  return docs.map((d) => d._id);
}

function sortedIds(docs: Array<{ _id: string }>): string[] {
  return ids(docs).sort();
}

/** Compares two documents the way orderBy does, for homogeneous scalar fields. */
function compareBy(orderBy: Array<[string, Direction]>) {
  return (a: object, b: object): number => {
    for (const [field, direction] of orderBy) {
      const x = (a as Record<string, string | number>)[field];
      const y = (b as Record<string, string | number>)[field];
      if (x === y) continue;
      const sign = x < y ? -1 : 1;
      return direction === 'asc' ? sign : -sign;
    }
    return 0;
  };
}

async function readAllPages<T extends { _id: string }>(
  coll: Collection<T>,
  options: { where?: Where; orderBy: Array<[string, Direction]>; pageSize: number },
  betweenPages?: (last: Stored<T>) => Promise<void>,
): Promise<Array<Stored<T>>> {
  const seen: Array<Stored<T>> = [];
  let after: Record<string, Scalar> | undefined;
  for (let guard = 0; guard < 1000; guard++) {
    const page = await coll.find({ where: options.where, orderBy: options.orderBy, limit: options.pageSize, after });
    assert.ok(page.length <= options.pageSize, 'a page never exceeds the limit');
    seen.push(...page);
    if (page.length < options.pageSize) return seen;
    const last = page[page.length - 1];
    after = Object.fromEntries(options.orderBy.map(([field]) => [field, ((last as unknown as Record<string, Scalar | undefined>)[field] ?? null)]));
    if (betweenPages) await betweenPages(last);
  }
  throw new Error('paging did not terminate');
}

export function documentStoreContract(adapterName: string, open: OpenDocumentStore): void {
  const test = suite(`document store contract (${adapterName})`);
  let store: DocumentStore;
  let closeStore: () => Promise<void>;
  const created: string[] = [];

  function collectionName(label: string): string {
    const name = `contract_${label}_${randomBytes(5).toString('hex')}`;
    created.push(name);
    return name;
  }

  test.before(async () => {
    ({ store, close: closeStore } = await open());
  });

  test.after(async () => {
    if (!store) return;
    for (const name of created) await store.drop(name).catch(() => undefined);
    await closeStore();
  });

  test('ping answers true on an open store', async () => {
    assert.is(await store.ping(), true);
  });

  test('insert stores version 1 and get returns the document as inserted', async () => {
    const coll = store.collection<Item>(collectionName('insert'));
    const doc: Item = { _id: 'i1', n: 4.5, s: 'text', flag: false, tags: ['a', 2], nested: { k: 'p', depth: 1, labels: [] }, opt: null };
    const stored = await coll.insert(doc);
    assert.equal(stored, { ...doc, _v: 1 });
    assert.equal(await coll.get('i1'), { ...doc, _v: 1 });
    assert.is(await coll.get('missing'), null);
  });

  test('inserting a taken _id throws DuplicateKeyError on _id and keeps the original', async () => {
    const name = collectionName('dupid');
    const coll = store.collection<Account>(name);
    await coll.insert({ _id: 'x', email: 'first@example.com' });
    await rejectsDuplicate(coll.insert({ _id: 'x', email: 'second@example.com' }), name, '_id');
    assert.equal(await coll.get('x'), { _id: 'x', email: 'first@example.com', _v: 1 });
    assert.is(await coll.count(), 1);
  });

  test('insertMany (where the adapter has it) stores each document at version 1 and names those refused for a taken _id or unique value', async () => {
    const name = collectionName('insertmany');
    const coll = store.collection<Account>(name);
    // Optional in the port: an adapter without it has nothing to honour here.
    if (!coll.insertMany) return;
    await coll.ensureIndexes([{ name: 'by_email', fields: [['email', 'asc']], unique: true }]);
    await coll.insert({ _id: 'taken', email: 'taken@example.com' });
    assert.equal(await coll.insertMany([]), { duplicates: [] });
    const result = await coll.insertMany([
      { _id: 'a', email: 'a@example.com' },
      { _id: 'taken', email: 'other@example.com' },
      { _id: 'b', email: 'taken@example.com' },
      { _id: 'c', email: 'c@example.com' },
      { _id: 'a', email: 'a2@example.com' },
    ]);
    assert.equal([...result.duplicates].sort(), ['a', 'b', 'taken']);
    assert.equal(await coll.find({ orderBy: [['_id', 'asc']] }), [
      { _id: 'a', email: 'a@example.com', _v: 1 },
      { _id: 'c', email: 'c@example.com', _v: 1 },
      { _id: 'taken', email: 'taken@example.com', _v: 1 },
    ]);
  });

  test('insert and insertMany at a given version store it, replace counts on from it, and find orders by _v', async () => {
    const high = 2 ** 32 + 7;
    for (const indexed of [false, true]) {
      const coll = store.collection<Account>(collectionName(indexed ? 'version_indexed' : 'version'));
      if (indexed) await coll.ensureIndexes([{ name: 'by_email', fields: [['email', 'asc']], unique: true }]);
      await coll.insert({ _id: 'low', email: 'low@example.com' });
      assert.equal(await coll.insert({ _id: 'a', email: 'a@example.com' }, { version: high }), { _id: 'a', email: 'a@example.com', _v: high });
      assert.equal(await coll.get('a'), { _id: 'a', email: 'a@example.com', _v: high });
      // A compare-and-set at any other version, 1 among them, finds nothing to replace.
      assert.is(await coll.replace({ _id: 'a', email: 'stale@example.com' }, 1), null);
      assert.equal(await coll.replace({ _id: 'a', email: 'a2@example.com' }, high), { _id: 'a', email: 'a2@example.com', _v: high + 1 });
      if (coll.insertMany) {
        assert.equal(await coll.insertMany([{ _id: 'b', email: 'b@example.com' }, { _id: 'a', email: 'x@example.com' }], { version: high }), { duplicates: ['a'] });
        assert.equal(await coll.get('b'), { _id: 'b', email: 'b@example.com', _v: high });
      }
      assert.equal(await coll.find({ orderBy: [['_v', 'desc'], ['_id', 'asc']], limit: 1, fields: [] }), [{ _id: 'a', _v: high + 1 }]);
      assert.equal(await coll.find({ where: { email: 'a2@example.com' } }), [{ _id: 'a', email: 'a2@example.com', _v: high + 1 }]);
      for (const version of [0, -1, 1.5, 2 ** 53]) {
        try {
          await coll.insert({ _id: 'bad', email: 'bad@example.com' }, { version });
          assert.unreachable(`version ${version} accepted`);
        } catch (err) {
          assert.match((err as Error).message, /invalid document version/);
        }
      }
      assert.is(await coll.get('bad'), null);
    }
  });

  test('a unique index rejects a taken value on insert, single and compound', async () => {
    const name = collectionName('uniqins');
    const coll = store.collection<Account & { tenant?: string; slug?: string }>(name);
    const indexes = [
      { name: 'by_email', fields: [['email', 'asc']] as Array<[string, Direction]>, unique: true },
      { name: 'by_tenant_slug', fields: [['tenant', 'asc'], ['slug', 'desc']] as Array<[string, Direction]>, unique: true },
      { name: 'by_name', fields: [['name', 'asc']] as Array<[string, Direction]> },
    ];
    await coll.ensureIndexes(indexes);
    await coll.ensureIndexes(indexes); // idempotent
    await coll.insert({ _id: 'a', email: 'a@example.com', name: 'same', tenant: 't1', slug: 'home' });
    await rejectsDuplicate(coll.insert({ _id: 'b', email: 'a@example.com', tenant: 't9', slug: 'x' }), name, 'by_email');
    // A non-unique index does not constrain, and the compound one only constrains the pair.
    await coll.insert({ _id: 'c', email: 'c@example.com', name: 'same', tenant: 't2', slug: 'home' });
    await coll.insert({ _id: 'd', email: 'd@example.com', tenant: 't1', slug: 'about' });
    await rejectsDuplicate(coll.insert({ _id: 'e', email: 'e@example.com', tenant: 't1', slug: 'home' }), name, 'by_tenant_slug');
    assert.equal(sortedIds(await coll.find()), ['a', 'c', 'd']);
    assert.equal(sortedIds(await coll.find({ where: { name: 'same' } })), ['a', 'c']);
  });

  test('a unique index rejects a taken value on replace and leaves the document as it was', async () => {
    const name = collectionName('uniqrep');
    const coll = store.collection<Account>(name);
    await coll.ensureIndexes([{ name: 'by_email', fields: [['email', 'asc']], unique: true }]);
    await coll.insert({ _id: 'a', email: 'a@example.com' });
    await coll.insert({ _id: 'b', email: 'b@example.com' });
    await rejectsDuplicate(coll.replace({ _id: 'b', email: 'a@example.com' }, 1), name, 'by_email');
    assert.equal(await coll.get('b'), { _id: 'b', email: 'b@example.com', _v: 1 });
    // Keeping one's own value is no collision.
    const kept = await coll.replace({ _id: 'a', email: 'a@example.com', name: 'Ann' }, 1);
    assert.equal(kept, { _id: 'a', email: 'a@example.com', name: 'Ann', _v: 2 });
  });

  test('ensureIndexes fails with DuplicateKeyError when existing documents already collide', async () => {
    const name = collectionName('uniqlate');
    const coll = store.collection<Account>(name);
    await coll.insert({ _id: 'a', email: 'same@example.com' });
    await coll.insert({ _id: 'b', email: 'same@example.com' });
    await rejectsDuplicate(coll.ensureIndexes([{ name: 'by_email', fields: [['email', 'asc']], unique: true }]), name, 'by_email');
    assert.is(await coll.count(), 2);
  });

  test('replace is compare-and-set on the version', async () => {
    const coll = store.collection<Account>(collectionName('cas'));
    await coll.insert({ _id: 'a', email: 'v1@example.com' });
    const second = await coll.replace({ _id: 'a', email: 'v2@example.com' }, 1);
    assert.equal(second, { _id: 'a', email: 'v2@example.com', _v: 2 });
    assert.is(await coll.replace({ _id: 'a', email: 'stale@example.com' }, 1), null);
    assert.equal(await coll.get('a'), { _id: 'a', email: 'v2@example.com', _v: 2 });
    // A document passed back with its stored _v is accepted; the store owns the version.
    const third = await coll.replace({ ...(second as Stored<Account>), email: 'v3@example.com' }, 2);
    assert.equal(third, { _id: 'a', email: 'v3@example.com', _v: 3 });
    assert.is(await coll.replace({ _id: 'gone', email: 'x@example.com' }, 1), null);
    assert.is(await coll.get('gone'), null);
  });

  test('of 20 concurrent replaces from the same version exactly one wins', async () => {
    const coll = store.collection<Account>(collectionName('race'));
    await coll.insert({ _id: 'a', email: 'start@example.com' });
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => coll.replace({ _id: 'a', email: `writer${i}@example.com` }, 1)),
    );
    const winners = results.filter((r): r is Stored<Account> => r !== null);
    assert.is(winners.length, 1);
    assert.is(winners[0]._v, 2);
    assert.equal(await coll.get('a'), winners[0]);
  });

  test('of concurrent replaces and deletes at one version exactly one wins, round after round', async () => {
    const coll = store.collection<Account>(collectionName('race_mixed'));
    for (let round = 0; round < 5; round++) {
      const id = `r${round}`;
      await coll.insert({ _id: id, email: 'start@example.com' });
      await coll.replace({ _id: id, email: 'second@example.com' }, 1);
      const results = await Promise.all(Array.from({ length: 12 }, (_, i) => (i % 3 === 0
        ? coll.delete(id, 2)
        : coll.replace({ _id: id, email: `writer${i}@example.com` }, 2).then((stored) => stored !== null))));
      assert.is(results.filter(Boolean).length, 1, `round ${round}`);
      const left = await coll.get(id);
      const deleted = results.some((won, i) => won && i % 3 === 0);
      assert.is(left === null, deleted, `round ${round}: the document is gone exactly when a delete won`);
      if (left) assert.is(left._v, 3);
    }
  });

  test('delete removes a document, only at the given version when one is given', async () => {
    const coll = store.collection<Account>(collectionName('delete'));
    await coll.insert({ _id: 'a', email: 'a@example.com' });
    await coll.insert({ _id: 'b', email: 'b@example.com' });
    await coll.replace({ _id: 'b', email: 'b2@example.com' }, 1);
    assert.is(await coll.delete('a'), true);
    assert.is(await coll.get('a'), null);
    assert.is(await coll.delete('a'), false);
    assert.is(await coll.delete('b', 1), false);
    assert.ok(await coll.get('b'));
    assert.is(await coll.delete('b', 2), true);
    assert.is(await coll.get('b'), null);
    assert.is(await coll.count(), 0);
    // The _id is free again.
    assert.is((await coll.insert({ _id: 'a', email: 'again@example.com' }))._v, 1);
  });

  const items: Item[] = [
    { _id: 'a', n: 1, s: 'x', flag: true, tags: ['red', 'blue'], nested: { k: 'p', depth: 1, labels: ['hot'] }, opt: null },
    { _id: 'b', n: 2, s: 'y', flag: false, tags: ['blue', 1], nested: { k: 'q', depth: 2, labels: [] } },
    { _id: 'c', n: 3, s: 'z', flag: true, tags: [], nested: { k: 'p', depth: 3, labels: ['cold', 'hot'] }, opt: 'set' },
    { _id: 'd', n: 10, s: '10', flag: false, tags: ['green', 7], nested: { k: 'r', depth: 4, labels: ['cold'] } },
    { _id: 'e', n: 2.5, flag: true, tags: ['red', true], nested: { k: 'q', depth: 5, labels: [] } },
  ];

  const queries: Array<[label: string, where: Where, expected: string[]]> = [
    ['scalar string equality', { s: 'x' }, ['a']],
    ['scalar number equality', { n: 2 }, ['b']],
    ['a number does not equal its string', { s: 10 }, []],
    ['a string does not equal its number', { n: '10' }, []],
    ['boolean true', { flag: true }, ['a', 'c', 'e']],
    ['boolean false', { flag: false }, ['b', 'd']],
    ['a boolean does not equal 1', { n: true }, []],
    ['null matches null and missing', { opt: null }, ['a', 'b', 'd', 'e']],
    ['eq null likewise', { opt: { eq: null } }, ['a', 'b', 'd', 'e']],
    ['ne null matches present values', { opt: { ne: null } }, ['c']],
    ['eq', { s: { eq: 'y' } }, ['b']],
    ['ne includes documents without the field', { s: { ne: 'x' } }, ['b', 'c', 'd', 'e']],
    ['in strings', { s: { in: ['x', 'z', 'nope'] } }, ['a', 'c']],
    ['in numbers', { n: { in: [1, 10] } }, ['a', 'd']],
    ['in is typed', { s: { in: ['y', 10] } }, ['b']],
    ['in with null', { opt: { in: [null, 'set'] } }, ['a', 'b', 'c', 'd', 'e']],
    ['in empty', { s: { in: [] } }, []],
    ['gt', { n: { gt: 2 } }, ['c', 'd', 'e']],
    ['gte', { n: { gte: 2 } }, ['b', 'c', 'd', 'e']],
    ['lt', { n: { lt: 2.5 } }, ['a', 'b']],
    ['lte', { n: { lte: 2.5 } }, ['a', 'b', 'e']],
    ['range on both ends', { n: { gt: 1, lte: 3 } }, ['b', 'c', 'e']],
    ['string range', { s: { gte: 'x', lt: 'z' } }, ['a', 'b']],
    ['string range compares as strings', { s: { gt: 'a' } }, ['a', 'b', 'c']],
    ['contains a string', { tags: { contains: 'blue' } }, ['a', 'b']],
    ['contains a number', { tags: { contains: 7 } }, ['d']],
    ['contains is typed', { tags: { contains: '7' } }, []],
    ['contains true is not contains 1', { tags: { contains: true } }, ['e']],
    ['contains 1 is not contains true', { tags: { contains: 1 } }, ['b']],
    ['contains only looks into arrays', { s: { contains: 'x' } }, []],
    ['contains nothing matching', { tags: { contains: 'purple' } }, []],
    ['dotted equality', { 'nested.k': 'p' }, ['a', 'c']],
    ['dotted range', { 'nested.depth': { gte: 2, lt: 4 } }, ['b', 'c']],
    ['dotted contains', { 'nested.labels': { contains: 'cold' } }, ['c', 'd']],
    ['_id conditions', { _id: { in: ['a', 'c', 'zz'] } }, ['a', 'c']],
    ['_id equality', { _id: 'c' }, ['c']],
    ['_id eq nothing', { _id: { eq: 'zz' } }, []],
    ['_id in with repeats', { _id: { in: ['e', 'e', 'b'] } }, ['b', 'e']],
    ['_id range', { _id: { gt: 'c' } }, ['d', 'e']],
    ['all entries must hold', { flag: true, n: { gt: 1 }, 'nested.k': 'q' }, ['e']],
    ['empty where', {}, ['a', 'b', 'c', 'd', 'e']],
  ];

  test('find and count honour every condition operator', async () => {
    const coll = store.collection<Item>(collectionName('find'));
    await coll.ensureIndexes([
      { name: 'by_n', fields: [['n', 'asc']] },
      { name: 'by_s', fields: [['s', 'asc']] },
      { name: 'by_nested_k', fields: [['nested.k', 'asc'], ['nested.depth', 'desc']] },
    ]);
    for (const item of items) await coll.insert(item);
    for (const [label, where, expected] of queries) {
      assert.equal(sortedIds(await coll.find({ where })), expected, label);
      assert.is(await coll.count(where), expected.length, `count: ${label}`);
    }
    assert.is(await coll.count(), items.length);
    assert.equal(await coll.find({ where: { _id: 'c' } }), [{ ...items[2], _v: 1 }]);
  });

  test('deleteWhere deletes every matching document, whatever its version, and says how many', async () => {
    const coll = store.collection<Item>(collectionName('delete_where'));
    await coll.ensureIndexes([{ name: 'by_n', fields: [['n', 'asc']] }]);
    for (const item of items) await coll.insert(item);
    await coll.replace({ ...items[1], s: 'y2' }, 1);
    assert.is(await coll.deleteWhere({ n: { lt: 2.5 } }), 2);
    assert.equal(sortedIds(await coll.find()), ['c', 'd', 'e']);
    assert.is(await coll.deleteWhere({ n: { lt: 2.5 } }), 0, 'nothing left to match');
    assert.is(await coll.deleteWhere({ _id: { in: ['c', 'zz'] } }), 1);
    assert.is(await coll.deleteWhere({ flag: true, 'nested.k': 'q' }), 1);
    assert.equal(sortedIds(await coll.find()), ['d']);
    assert.is(await store.collection<Item>(collectionName('delete_where_never')).deleteWhere({ n: 1 }), 0, 'a collection never written to');
  });

  test('a find by _ids honours limit', async () => {
    const coll = store.collection<Item>(collectionName('find_ids'));
    for (const item of items) await coll.insert(item);
    const found = await coll.find({ where: { _id: { in: ['a', 'b', 'c'] } }, limit: 2 });
    assert.is(found.length, 2);
    assert.ok(found.every((doc) => ['a', 'b', 'c'].includes(doc._id)));
    assert.equal(await coll.find({ where: { _id: { in: ['a'] } }, limit: 0 }), []);
  });

  test('a collection never written to is empty', async () => {
    const coll = store.collection<Item>(collectionName('never'));
    assert.equal(await coll.find({ where: { n: 1 }, orderBy: [['n', 'asc']], limit: 3 }), []);
    assert.is(await coll.count(), 0);
    assert.is(await coll.get('a'), null);
    assert.is(await coll.delete('a'), false);
  });

  /** `doc` cut down to the listed fields it has, plus _id and _v: what a find with `fields` returns. */
  function projected(doc: object, fields: string[], version = 1): Record<string, unknown> {
    const kept = Object.entries(doc).filter(([key]) => key === '_id' || fields.includes(key));
    return { ...Object.fromEntries(kept), _v: version };
  }

  async function rejects(work: Promise<unknown>, what: string): Promise<void> {
    try {
      await work;
    } catch (err) {
      assert.instance(err, Error, what);
      return;
    }
    assert.unreachable(`expected a rejection: ${what}`);
  }

  test('a find with fields returns only those fields, in their JSON types, and leaves out those a document lacks', async () => {
    const coll = store.collection<Item>(collectionName('fields'));
    for (const item of items) await coll.insert(item);
    await coll.replace({ ...items[3], s: 'ten' }, 1);
    const stored = (doc: Item) => (doc._id === 'd' ? { ...doc, s: 'ten' } : doc);
    // Numbers (whole and not), a string some documents lack, a boolean, a null some hold and
    // others lack, an array of mixed scalars, an object holding an array: as inserted.
    const fields = ['n', 's', 'flag', 'opt', 'tags', 'nested'] as const;
    assert.equal(await coll.find({ orderBy: [['_id', 'asc']], fields }), items.map((item) => projected(stored(item), [...fields], item._id === 'd' ? 2 : 1)));
    assert.equal(await coll.find({ where: { _id: 'e' }, fields: ['s', 'opt'] }), [{ _id: 'e', _v: 1 }], 'lacking both');
    assert.equal(await coll.find({ where: { _id: 'a' }, fields: ['opt'] }), [{ _id: 'a', opt: null, _v: 1 }], 'an explicit null stays');
    assert.equal(await coll.find({ where: { _id: 'a' }, fields: [] }), [{ _id: 'a', _v: 1 }], 'no fields: _id and _v only');
    assert.equal(await coll.find({ where: { _id: 'd' }, fields: ['_id', '_v', 'n', 'n'] }), [{ _id: 'd', n: 10, _v: 2 }], '_id and _v may be listed, fields repeated');

    const odd = store.collection<{ _id: string; zero: number; empty: string; no: boolean; deep: unknown; big: string[] }>(collectionName('fields_odd'));
    const doc = { _id: 'o', zero: 0, empty: '', no: false, deep: { list: [{ a: null, b: [true, 1.25, 'x'] }, { c: [] }, {}], none: null, inner: { n: -3 } }, big: Array.from({ length: 50 }, (_, i) => `entry ${i}`) };
    await odd.insert(doc);
    // Falsy values are values, not missing ones.
    assert.equal(await odd.find({ fields: ['zero', 'empty', 'no', 'deep'] }), [projected(doc, ['zero', 'empty', 'no', 'deep'])]);
    assert.equal(await store.collection<Item>(collectionName('fields_never')).find({ fields: ['n'] }), [], 'a collection never written to');
  });

  test('a find with fields honours where, orderBy, limit and after on fields it does not return', async () => {
    const coll = store.collection<Item>(collectionName('fields_query'));
    await coll.ensureIndexes([{ name: 'by_n', fields: [['n', 'asc']] }]);
    for (const item of items) await coll.insert(item);
    const orderBy: Array<[string, Direction]> = [['n', 'desc'], ['_id', 'asc']];
    // flag true: c (3), e (2.5), a (1) by n descending.
    assert.equal(await coll.find({ where: { flag: true }, orderBy, limit: 2, fields: ['s'] }), [{ _id: 'c', s: 'z', _v: 1 }, { _id: 'e', _v: 1 }]);
    assert.equal(await coll.find({ where: { flag: true }, orderBy, after: { n: 2.5, _id: 'e' }, fields: ['s'] }), [{ _id: 'a', s: 'x', _v: 1 }]);
    assert.equal(await coll.find({ where: { 'nested.k': 'q' }, orderBy: [['nested.depth', 'desc']], fields: ['tags'] }), [
      { _id: 'e', tags: ['red', true], _v: 1 },
      { _id: 'b', tags: ['blue', 1], _v: 1 },
    ]);
    assert.equal(await coll.find({ where: { tags: { contains: 'blue' } }, orderBy: [['_id', 'asc']], limit: 0, fields: ['n'] }), []);
    // By _ids (some adapters answer these with point reads).
    const byIds = await coll.find({ where: { _id: { in: ['a', 'e', 'zz'] } }, fields: ['s', 'flag'] });
    assert.equal(byIds.sort((x, y) => x._id.localeCompare(y._id)), [{ _id: 'a', s: 'x', flag: true, _v: 1 }, { _id: 'e', flag: true, _v: 1 }]);
    assert.equal(await coll.find({ where: { _id: 'b' }, fields: ['nested'] }), [{ _id: 'b', nested: { k: 'q', depth: 2, labels: [] }, _v: 1 }]);
  });

  test('a find with fields refuses names that are not plain top-level keys', async () => {
    const coll = store.collection<Item>(collectionName('fields_bad'));
    await coll.insert(items[0]);
    for (const name of ['', 'nested.k', '$where', 'a$', 'say"', 'back\\slash', 'line\nbreak']) {
      await rejects(coll.find({ fields: [name] }), JSON.stringify(name));
    }
    assert.is((await coll.find({ fields: ['n'] })).length, 1);
  });

  // Any JSON value is a document's content (an email's metadata is free-form): keys MongoDB
  // reads as paths or operators, NUL (which BSON keys and PostgreSQL's jsonb refuse), control
  // characters, quotes and backslashes in keys, arrays in arrays, lone surrogates, and U+E000
  // (the MongoDB adapter's escape character, infra/mongodb/storable.ts) in keys and strings.
  const ESCAPE = '\uE000';
  const anyJson = (): Record<string, unknown> => ({
    ...JSON.parse('{"__proto__": {"x.y": 1}}') as Record<string, unknown>,
    'order.id': 42, '.': 1, $amount: '9.99', $: { $in: [1], '$gt.x': null }, 'a$b': 'c$d', '': 'an empty key',
    'a\u0000b': 'a key with NUL', 'tab\tline\nkey\u001f': 2, 'say "hi"': 'quoted', 'back\\slash': true, 'lone\ud800': 'a lone high surrogate', '\udc00': 'a lone low one',
    [ESCAPE]: 'the escape character alone', [`${ESCAPE}lead`]: `${ESCAPE}lead`, [`x${ESCAPE}0000`]: `${ESCAPE}002e`, [`${ESCAPE}${ESCAPE}`]: ESCAPE,
    note: 'before\u0000after', nuls: '\u0000\u0000', lone: 'x\ud800y\udc00', pair: '😀',
    route: [[52.52, 13.4], [48.14, 11.58]], empty: [[]], deep: [[[1, 'a\u0000'], []], [{ 'k.k': [[null, { [ESCAPE]: [[ESCAPE]] }]] }]],
    wrapperLike: { [ESCAPE]: [1, 2] },
  });

  /** Deep equality that also holds keys' order and own `__proto__` keys. */
  function sameJson(actual: unknown, expected: unknown, what: string): void {
    assert.equal(actual, expected, what);
    assert.is(JSON.stringify(actual), JSON.stringify(expected), `${what}: the same keys, in the same order`);
  }

  test('any JSON document round-trips: odd keys and strings, arrays in arrays, the escape character, at any depth', async () => {
    const coll = store.collection<{ _id: string; group: string } & Record<string, unknown>>(collectionName('any_json'));
    const doc = { _id: 'odd', group: 'g', ...anyJson(), metadata: anyJson(), list: [anyJson(), [anyJson()]] };
    sameJson(await coll.insert(doc), { ...doc, _v: 1 }, 'insert');
    sameJson(await coll.get('odd'), { ...doc, _v: 1 }, 'get');
    sameJson(await coll.find({ where: { group: 'g' } }), [{ ...doc, _v: 1 }], 'find');
    sameJson(await coll.find({ where: { _id: 'odd' } }), [{ ...doc, _v: 1 }], 'find by _id');
    // The projected fields come in an order of the adapter's; each holds its value as written.
    const [picked] = await coll.find({ where: { _id: { in: ['odd', 'other'] } }, fields: ['metadata', 'note', 'route'] });
    assert.equal(picked, projected(doc, ['metadata', 'note', 'route']), 'find with fields');
    sameJson(picked.metadata, doc.metadata, 'a projected field');

    const changed = { ...doc, metadata: { 'order.id': 43, nested: anyJson() }, note: 'b\u0000' };
    sameJson(await coll.replace(changed, 1), { ...changed, _v: 2 }, 'replace');
    sameJson(await coll.get('odd'), { ...changed, _v: 2 }, 'get after replace');
    if (coll.insertMany) {
      assert.equal(await coll.insertMany([{ _id: 'many', group: 'h', ...anyJson() }, { _id: 'odd', group: 'h' }]), { duplicates: ['odd'] });
      sameJson(await coll.find({ where: { group: 'h' } }), [{ _id: 'many', group: 'h', ...anyJson(), _v: 1 }], 'insertMany');
    }
    // Ordinary queries over documents holding them.
    assert.is(await coll.count({ group: 'g' }), 1);
    assert.is(await coll.deleteWhere({ group: 'g' }), 1);
    assert.is(await coll.get('odd'), null);
  });

  test('strings holding NUL or the escape character are found by equality, in, ne and contains, as _ids too, and collide in a unique index', async () => {
    const name = collectionName('odd_strings');
    const coll = store.collection<{ _id: string; s: string; list?: string[]; n?: number }>(name);
    await coll.ensureIndexes([{ name: 'by_s', fields: [['s', 'asc']], unique: true }]);
    const docs = [
      { _id: 'nul', s: 'a\u0000b', list: ['x\u0000', 'y'] },
      { _id: 'plain', s: 'a', list: ['x'] },
      { _id: 'escape', s: `${ESCAPE}x`, list: [ESCAPE] },
      { _id: 'id\u0000nul', s: 'other', n: 1 },
      { _id: `${ESCAPE}id`, s: `x${ESCAPE}` },
    ];
    for (const doc of docs) await coll.insert(doc);
    const found = async (where: Where) => sortedIds(await coll.find({ where }));
    assert.equal(await found({ s: 'a\u0000b' }), ['nul']);
    assert.equal(await found({ s: { eq: 'a\u0000b' } }), ['nul']);
    assert.equal(await found({ s: 'a' }), ['plain'], 'not a prefix of it');
    assert.equal(await found({ s: { in: ['a\u0000b', `${ESCAPE}x`, 'zz'] } }), ['escape', 'nul']);
    assert.equal(await found({ s: `x${ESCAPE}` }), [`${ESCAPE}id`]);
    assert.equal(await found({ s: { ne: 'a\u0000b' } }), sortedIds(docs.filter((d) => d._id !== 'nul')));
    assert.equal(await found({ list: { contains: 'x\u0000' } }), ['nul']);
    assert.equal(await found({ list: { contains: ESCAPE } }), ['escape']);
    assert.equal(await found({ _id: 'id\u0000nul' }), ['id\u0000nul']);
    assert.equal(await found({ _id: { in: ['id\u0000nul', `${ESCAPE}id`] } }), sortedIds([{ _id: 'id\u0000nul' }, { _id: `${ESCAPE}id` }]));
    assert.is(await coll.count({ s: 'a\u0000b' }), 1);
    assert.equal(await coll.get('id\u0000nul'), { ...docs[3], _v: 1 });
    assert.equal(await coll.get(`${ESCAPE}id`), { ...docs[4], _v: 1 });
    assert.is(await coll.get('id'), null);
    assert.equal(await coll.replace({ _id: 'id\u0000nul', s: 'other\u0000' }, 1), { _id: 'id\u0000nul', s: 'other\u0000', _v: 2 });
    assert.equal(await coll.find({ where: { s: 'other\u0000' }, fields: ['s'] }), [{ _id: 'id\u0000nul', s: 'other\u0000', _v: 2 }]);
    await rejectsDuplicate(coll.insert({ _id: 'again', s: 'a\u0000b' }), name, 'by_s');
    await rejectsDuplicate(coll.replace({ _id: 'plain', s: `${ESCAPE}x` }, 1), name, 'by_s');
    assert.is(await coll.delete('id\u0000nul', 1), false);
    assert.is(await coll.delete('id\u0000nul', 2), true);
    assert.is(await coll.delete(`${ESCAPE}id`), true);
    assert.equal(sortedIds(await coll.find()), ['escape', 'nul', 'plain']);
  });

  const ranked: Ranked[] = [
    { _id: 'r1', group: 'b', rank: 2 },
    { _id: 'r2', group: 'a', rank: 1 },
    { _id: 'r3', group: 'b', rank: 5 },
    { _id: 'r4', group: 'a', rank: 3 },
    { _id: 'r5', group: 'c', rank: 2 },
    { _id: 'r6', group: 'b', rank: 2 },
  ];

  test('orderBy sorts on several fields with mixed directions, and limit cuts', async () => {
    const coll = store.collection<Ranked>(collectionName('order'));
    for (const r of ranked) await coll.insert(r);
    assert.equal(ids(await coll.find({ orderBy: [['group', 'asc'], ['rank', 'desc'], ['_id', 'asc']] })), ['r4', 'r2', 'r3', 'r1', 'r6', 'r5']);
    assert.equal(ids(await coll.find({ orderBy: [['rank', 'asc'], ['group', 'desc'], ['_id', 'desc']] })), ['r2', 'r5', 'r6', 'r1', 'r4', 'r3']);
    assert.equal(ids(await coll.find({ orderBy: [['rank', 'desc'], ['_id', 'asc']], limit: 3 })), ['r3', 'r4', 'r1']);
    assert.equal(ids(await coll.find({ where: { group: 'b' }, orderBy: [['_id', 'desc']], limit: 2 })), ['r6', 'r3']);
    assert.equal(ids(await coll.find({ orderBy: [['_id', 'asc']], limit: 100 })), ['r1', 'r2', 'r3', 'r4', 'r5', 'r6']);
  });

  test('the after cursor returns documents strictly after it, per field direction', async () => {
    const coll = store.collection<Ranked>(collectionName('after'));
    for (const r of ranked) await coll.insert(r);
    const orderBy: Array<[string, Direction]> = [['group', 'asc'], ['rank', 'desc'], ['_id', 'asc']];
    // Full order: r4 r2 r3 r1 r6 r5
    assert.equal(ids(await coll.find({ orderBy, after: { group: 'b', rank: 2, _id: 'r1' } })), ['r6', 'r5']);
    assert.equal(ids(await coll.find({ orderBy, after: { group: 'a', rank: 1, _id: 'r2' }, limit: 2 })), ['r3', 'r1']);
    // The cursor need not be an existing document.
    assert.equal(ids(await coll.find({ orderBy, after: { group: 'b', rank: 3, _id: 'zz' } })), ['r1', 'r6', 'r5']);
    assert.equal(ids(await coll.find({ orderBy, after: { group: 'c', rank: 2, _id: 'r5' } })), []);
  });

  test('keyset paging visits every document exactly once, through ties on the first field', async () => {
    const coll = store.collection<Ranked & { odd: boolean }>(collectionName('paging'));
    const docs = Array.from({ length: 25 }, (_, i) => ({ _id: `p${String(i).padStart(2, '0')}`, group: `g${i % 3}`, rank: i % 4, odd: i % 2 === 1 }));
    // Insert out of order so storage order is not the answer.
    for (const d of [...docs].reverse()) await coll.insert(d);
    for (const orderBy of [
      [['rank', 'desc'], ['_id', 'asc']],
      [['rank', 'asc'], ['group', 'desc'], ['_id', 'desc']],
      [['group', 'asc'], ['_id', 'asc']],
    ] as Array<Array<[string, Direction]>>) {
      for (const pageSize of [1, 4, 7, 25]) {
        const all = await readAllPages(coll, { orderBy, pageSize });
        assert.equal(ids(all), ids([...docs].sort(compareBy(orderBy))), `${JSON.stringify(orderBy)} by ${pageSize}`);
      }
    }
    const odd = await readAllPages(coll, { where: { odd: true }, orderBy: [['rank', 'asc'], ['_id', 'asc']], pageSize: 3 });
    assert.equal(ids(odd), ids(docs.filter((d) => d.odd).sort(compareBy([['rank', 'asc'], ['_id', 'asc']]))));
  });

  test('keyset paging neither skips nor repeats when documents are inserted between pages', async () => {
    const coll = store.collection<{ _id: string; score: number }>(collectionName('livepaging'));
    const orderBy: Array<[string, Direction]> = [['score', 'asc'], ['_id', 'asc']];
    const originals = Array.from({ length: 12 }, (_, i) => ({ _id: `o-${String(i).padStart(2, '0')}`, score: i * 10 }));
    for (const d of originals) await coll.insert(d);
    const behind: string[] = [];
    const ahead: string[] = [];
    let k = 0;
    const tag = () => String(k).padStart(3, '0');
    const seen = await readAllPages(coll, { orderBy, pageSize: 3 }, async (last) => {
      k++;
      // Behind the cursor: a smaller score, and the same score with a smaller _id ("a" < "o").
      const inserts = [
        { _id: `b-${tag()}`, score: last.score - 5 },
        { _id: `a-${tag()}`, score: last.score },
        // Ahead of it: the same score with a larger _id ("z" > "o"), and a larger score.
        { _id: `z-${tag()}`, score: last.score },
        { _id: `n-${tag()}`, score: last.score + 5 },
      ];
      behind.push(inserts[0]._id, inserts[1]._id);
      ahead.push(inserts[2]._id, inserts[3]._id);
      await Promise.all(inserts.map((d) => coll.insert(d)));
    });
    const seenIds = ids(seen);
    assert.is(new Set(seenIds).size, seenIds.length, 'no document is returned twice');
    for (const d of originals) assert.ok(seenIds.includes(d._id), `original ${d._id} seen`);
    for (const id of ahead) assert.ok(seenIds.includes(id), `${id} inserted ahead of the cursor is seen`);
    for (const id of behind) assert.not.ok(seenIds.includes(id), `${id} inserted behind the cursor is not seen`);
    assert.ok(k >= 4, 'several pages were read');
    const byOrder = compareBy(orderBy);
    for (let i = 1; i < seen.length; i++) assert.ok(byOrder(seen[i - 1], seen[i]) < 0, 'pages follow the order');
  });

  test('ordering and paging through a field some documents lack', async () => {
    const coll = store.collection<{ _id: string; due?: number | null }>(collectionName('optional'));
    const docs = [
      { _id: 'm1', due: 20 },
      { _id: 'm2' },
      { _id: 'm3', due: 10 },
      { _id: 'm4', due: null },
      { _id: 'm5', due: 20 },
      { _id: 'm6' },
    ];
    for (const d of docs) await coll.insert(d);
    const ascending: Array<[string, Direction]> = [['due', 'asc'], ['_id', 'asc']];
    const descending: Array<[string, Direction]> = [['due', 'desc'], ['_id', 'asc']];
    assert.equal(ids(await coll.find({ orderBy: ascending })), ['m2', 'm4', 'm6', 'm3', 'm1', 'm5']);
    assert.equal(ids(await coll.find({ orderBy: descending })), ['m1', 'm5', 'm3', 'm2', 'm4', 'm6']);
    for (const pageSize of [1, 2, 4]) {
      assert.equal(ids(await readAllPages(coll, { orderBy: ascending, pageSize })), ['m2', 'm4', 'm6', 'm3', 'm1', 'm5'], `asc by ${pageSize}`);
      assert.equal(ids(await readAllPages(coll, { orderBy: descending, pageSize })), ['m1', 'm5', 'm3', 'm2', 'm4', 'm6'], `desc by ${pageSize}`);
    }
    assert.equal(ids(await coll.find({ orderBy: ascending, after: { due: null, _id: 'm4' } })), ['m6', 'm3', 'm1', 'm5']);
    assert.equal(ids(await coll.find({ orderBy: descending, after: { due: 10, _id: 'm3' } })), ['m2', 'm4', 'm6']);
  });

  /** orderBy's comparison where missing and null sort as equal, before any value (after, descending). */
  const compareWithMissing = (orderBy: Array<[string, Direction]>) => (a: object, b: object): number => {
    for (const [field, direction] of orderBy) {
      const x = (a as Record<string, string | number | null | undefined>)[field] ?? null;
      const y = (b as Record<string, string | number | null | undefined>)[field] ?? null;
      if (x === y) continue;
      const sign = x === null ? -1 : y === null ? 1 : x < y ? -1 : 1;
      return direction === 'asc' ? sign : -sign;
    }
    return 0;
  };

  test('paging with the first fields of the order fixed by the where clause, through a field some documents lack', async () => {
    const coll = store.collection<{ _id: string; group: string; due?: number | null }>(collectionName('fixed_prefix'));
    await coll.ensureIndexes([
      { name: 'group_due_desc', fields: [['group', 'asc'], ['due', 'desc'], ['_id', 'desc']] },
      { name: 'group_due_asc', fields: [['group', 'asc'], ['due', 'asc'], ['_id', 'asc']] },
    ]);
    const docs = ['a', 'b', 'c'].flatMap((group) => Array.from({ length: 12 }, (_, i) => {
      const _id = `${group}${String(i).padStart(2, '0')}`;
      if (i % 4 === 0) return { _id, group };
      return { _id, group, due: i % 4 === 1 ? null : (i % 3) * 10 };
    }));
    for (const d of [...docs].reverse()) await coll.insert(d);
    const inB = docs.filter((d) => d.group === 'b');
    for (const orderBy of [
      [['group', 'asc'], ['due', 'desc'], ['_id', 'desc']],
      [['group', 'asc'], ['due', 'asc'], ['_id', 'asc']],
      [['group', 'desc'], ['due', 'desc'], ['_id', 'asc']],
    ] as Array<Array<[string, Direction]>>) {
      const expected = ids([...inB].sort(compareWithMissing(orderBy)));
      for (const pageSize of [1, 3, 5, 12]) {
        assert.equal(ids(await readAllPages(coll, { where: { group: 'b' }, orderBy, pageSize })), expected, `${JSON.stringify(orderBy)} by ${pageSize}`);
        assert.equal(ids(await readAllPages(coll, { where: { group: { eq: 'b' } }, orderBy, pageSize })), expected, `eq, ${JSON.stringify(orderBy)} by ${pageSize}`);
      }
    }
    const orderBy: Array<[string, Direction]> = [['group', 'asc'], ['due', 'desc'], ['_id', 'desc']];
    // A cursor whose first field is not the one the where clause fixes: every match is after it, or none.
    assert.equal(ids(await coll.find({ where: { group: 'b' }, orderBy, after: { group: 'a', due: 0, _id: 'a00' } })), ids([...inB].sort(compareWithMissing(orderBy))));
    assert.equal(ids(await coll.find({ where: { group: 'b' }, orderBy, after: { group: 'c', due: 20, _id: 'c99' } })), []);
    // After a cursor without the field, descending: only those without it, further on.
    assert.equal(ids(await coll.find({ where: { group: 'b' }, orderBy, after: { group: 'b', due: null, _id: 'b05' } })), ['b04', 'b01', 'b00']);
  });

  test('a find whose equalities several indexes serve answers the same whichever it reads by', async () => {
    interface Sent { _id: string; project: string; key: string; status: string; created: number; to: string[] }
    const coll = store.collection<Sent>(collectionName('several_indexes'));
    const order: Array<[string, Direction]> = [['created', 'desc'], ['_id', 'desc']];
    await coll.ensureIndexes([
      { name: 'project_created', fields: [['project', 'asc'], ...order] },
      { name: 'key_created', fields: [['project', 'asc'], ['key', 'asc'], ...order] },
      { name: 'project_status', fields: [['project', 'asc'], ['status', 'asc'], ...order] },
      { name: 'project_to', fields: [['project', 'asc'], ['to', 'asc'], ...order], arrayField: 'to' },
    ]);
    const docs: Sent[] = Array.from({ length: 60 }, (_, i) => ({
      _id: `s${String(i).padStart(2, '0')}`,
      project: i % 7 === 6 ? 'q' : 'p',
      key: i % 10 === 0 ? 'k1' : 'k0',
      status: i % 2 === 1 ? 'sent' : 'queued',
      created: Math.floor(i / 3),
      to: [`r${i % 3}`, 'all'],
    }));
    for (const d of [...docs].reverse()) await coll.insert(d);
    const wheres: Array<{ where: Where; matches: (d: Sent) => boolean }> = [
      { where: { project: 'p', key: 'k1', status: 'queued' }, matches: (d) => d.project === 'p' && d.key === 'k1' && d.status === 'queued' },
      { where: { project: 'p', key: 'k0', status: 'none' }, matches: () => false },
      { where: { project: 'p', key: 'k0', status: 'sent' }, matches: (d) => d.project === 'p' && d.key === 'k0' && d.status === 'sent' },
      { where: { project: 'p', status: 'sent', to: { contains: 'r1' } }, matches: (d) => d.project === 'p' && d.status === 'sent' && d.to.includes('r1') },
      { where: { project: 'p', status: 'queued', to: { contains: 'none' } }, matches: () => false },
      { where: { project: 'p', key: 'k1', to: { contains: 'all' } }, matches: (d) => d.project === 'p' && d.key === 'k1' },
      { where: { project: 'p', key: 'k0', status: 'sent', to: { contains: 'r2' }, created: { gte: 3, lt: 15 } }, matches: (d) => d.project === 'p' && d.key === 'k0' && d.status === 'sent' && d.to.includes('r2') && d.created >= 3 && d.created < 15 },
    ];
    for (const { where, matches } of wheres) {
      const expected = ids(docs.filter(matches).sort(compareWithMissing(order)));
      assert.equal(ids(await coll.find({ where, orderBy: order })), expected, JSON.stringify(where));
      assert.is(await coll.count(where), expected.length, `count ${JSON.stringify(where)}`);
      for (const pageSize of [1, 4]) assert.equal(ids(await readAllPages(coll, { where, orderBy: order, pageSize })), expected, `${JSON.stringify(where)} by ${pageSize}`);
      assert.equal(ids(await coll.find({ where, orderBy: order, limit: 2, fields: ['created'] })), expected.slice(0, 2), `fields ${JSON.stringify(where)}`);
    }
  });

  // An index with arrayField holds each element of the array (MongoDB's multikey index; the
  // embedded store keeps a table of the elements). Whatever keeps it, finds must answer as the
  // documents do, through every write and paging, and it must move and go with its collection.
  interface Tagged {
    _id: string;
    group: string;
    rank: number;
    tags?: unknown;
  }
  const TAG_INDEX = { name: 'group_tags_rank', fields: [['group', 'asc'], ['tags', 'asc'], ['rank', 'desc'], ['_id', 'desc']], arrayField: 'tags' } satisfies Parameters<Collection<Tagged>['ensureIndexes']>[0][number];
  const byRank: Array<[string, Direction]> = [['rank', 'desc'], ['_id', 'desc']];
  const tagged: Tagged[] = [
    { _id: 't1', group: 'g', rank: 3, tags: ['x', 'y', 'x'] },
    { _id: 't2', group: 'g', rank: 1, tags: ['y', 7, true] },
    { _id: 't3', group: 'g', rank: 2, tags: 'x' },
    { _id: 't4', group: 'h', rank: 5, tags: ['x'] },
    { _id: 't5', group: 'g', rank: 4, tags: [1, { x: 1 }, 'w'] },
    { _id: 't6', group: 'g', rank: 6 },
    { _id: 't7', group: 'g', rank: 3, tags: ['z', 'x'] },
  ];
  const tagIds = async (coll: Collection<Tagged>, where: Where) => {
    const found = ids(await coll.find({ where, orderBy: byRank }));
    assert.is(await coll.count(where), found.length, `count ${JSON.stringify(where)}`);
    return found;
  };

  test('an index over an array field (arrayField): contains answers as the documents do, in order, through every write', async () => {
    const coll = store.collection<Tagged>(collectionName('array_index'));
    await coll.ensureIndexes([TAG_INDEX]);
    for (const doc of tagged) await coll.insert(doc);
    assert.equal(await tagIds(coll, { group: 'g', tags: { contains: 'x' } }), ['t7', 't1'], 'once each, however often the array holds it; never a string');
    assert.equal(await tagIds(coll, { tags: { contains: 'x' } }), ['t4', 't7', 't1'], 'without the fields before it');
    assert.equal(await tagIds(coll, { group: 'g', tags: { contains: 7 } }), ['t2']);
    assert.equal(await tagIds(coll, { group: 'g', tags: { contains: '7' } }), [], 'typed');
    assert.equal(await tagIds(coll, { group: 'g', tags: { contains: true } }), ['t2'], 'true is not 1');
    assert.equal(await tagIds(coll, { group: 'g', tags: { contains: 1 } }), ['t5'], '1 is not true');
    assert.equal(await tagIds(coll, { group: 'g', tags: { contains: 'y' }, rank: { gte: 1, lt: 3 } }), ['t2']);
    assert.equal(await tagIds(coll, { group: 'g', tags: { contains: 'nothing' } }), []);
    assert.equal(ids(await readAllPages(coll, { where: { group: 'g', tags: { contains: 'x' } }, orderBy: byRank, pageSize: 1 })), ['t7', 't1']);
    assert.equal(await coll.find({ where: { group: 'g', tags: { contains: 'y' } }, orderBy: byRank, fields: ['rank'] }), [{ _id: 't1', rank: 3, _v: 1 }, { _id: 't2', rank: 1, _v: 1 }]);

    await coll.replace({ ...tagged[0], tags: ['y'] }, 1);
    await coll.replace({ ...tagged[2], tags: ['x'] }, 1);
    await coll.replace({ ...tagged[6], rank: 9 }, 1);
    await coll.replace({ ...tagged[3], group: 'g' }, 1);
    await coll.replace({ ...tagged[4], tags: ['w', 'w'], rank: 4 }, 1);
    assert.equal(await tagIds(coll, { group: 'g', tags: { contains: 'x' } }), ['t7', 't4', 't3'], 'elements, order and group as replaced');
    assert.equal(await tagIds(coll, { group: 'g', tags: { contains: 1 } }), []);
    assert.equal(await tagIds(coll, { group: 'g', tags: { contains: 'w' } }), ['t5']);
    assert.is(await coll.delete('t7'), true);
    assert.is(await coll.deleteWhere({ tags: { contains: 'w' } }), 1);
    assert.equal(await tagIds(coll, { group: 'g', tags: { contains: 'x' } }), ['t4', 't3']);
    assert.equal(await tagIds(coll, { tags: { contains: 'w' } }), []);
    await coll.insert({ _id: 't7', group: 'g', rank: 0, tags: ['x'] });
    if (coll.insertMany) await coll.insertMany([{ _id: 't8', group: 'g', rank: 7, tags: ['x', 'v'] }, { _id: 't9', group: 'g', rank: 8, tags: [] }]);
    else await coll.insert({ _id: 't8', group: 'g', rank: 7, tags: ['x', 'v'] });
    assert.equal(await tagIds(coll, { group: 'g', tags: { contains: 'x' } }), ['t8', 't4', 't3', 't7']);
  });

  test('an index over an array field made over documents already there, and redefined from and to a plain index', async () => {
    const coll = store.collection<Tagged>(collectionName('array_index_redefined'));
    const plain = { name: TAG_INDEX.name, fields: TAG_INDEX.fields };
    await coll.ensureIndexes([plain]);
    for (const doc of tagged) await coll.insert(doc);
    await coll.ensureIndexes([TAG_INDEX]);
    assert.equal(await tagIds(coll, { group: 'g', tags: { contains: 'x' } }), ['t7', 't1']);
    await coll.ensureIndexes([TAG_INDEX]);
    await coll.insert({ _id: 't8', group: 'g', rank: 0, tags: ['x'] });
    assert.equal(await tagIds(coll, { group: 'g', tags: { contains: 'x' } }), ['t7', 't1', 't8']);
    await coll.ensureIndexes([plain]);
    await coll.replace({ ...tagged[0], tags: [] }, 1);
    assert.equal(await tagIds(coll, { group: 'g', tags: { contains: 'x' } }), ['t7', 't8']);
    await coll.ensureIndexes([TAG_INDEX]);
    assert.equal(await tagIds(coll, { group: 'g', tags: { contains: 'x' } }), ['t7', 't8']);
  });

  test('an index over an array field moves with a rename and goes with a drop', async () => {
    const sourceName = collectionName('array_index_rebuilt');
    const targetName = collectionName('array_index_live');
    const source = store.collection<Tagged>(sourceName);
    const target = store.collection<Tagged>(targetName);
    await target.ensureIndexes([TAG_INDEX]);
    await target.insert({ _id: 'old', group: 'g', rank: 1, tags: ['x'] });
    await source.ensureIndexes([TAG_INDEX]);
    for (const doc of tagged) await source.insert(doc);
    await store.rename(sourceName, targetName);
    assert.equal(await tagIds(target, { group: 'g', tags: { contains: 'x' } }), ['t7', 't1'], 'the source\'s documents, not the old target\'s');
    await target.insert({ _id: 'new', group: 'g', rank: 8, tags: ['x'] });
    await target.replace({ ...tagged[0], tags: ['y'] }, 1);
    assert.equal(await tagIds(target, { group: 'g', tags: { contains: 'x' } }), ['new', 't7'], 'kept after the rename');
    // The source's name is free again, its index too.
    await source.ensureIndexes([TAG_INDEX]);
    await source.insert({ _id: 'again', group: 'g', rank: 1, tags: ['x'] });
    assert.equal(await tagIds(source, { group: 'g', tags: { contains: 'x' } }), ['again']);
    assert.equal(await tagIds(target, { group: 'g', tags: { contains: 'x' } }), ['new', 't7']);
    await store.drop(targetName);
    assert.equal(await tagIds(target, { group: 'g', tags: { contains: 'x' } }), []);
    await target.insert({ _id: 'fresh', group: 'g', rank: 1, tags: ['x'] });
    assert.equal(await tagIds(target, { group: 'g', tags: { contains: 'x' } }), ['fresh'], 'without the index');
    await target.ensureIndexes([TAG_INDEX]);
    assert.equal(await tagIds(target, { group: 'g', tags: { contains: 'x' } }), ['fresh']);
  });

  test('an arrayField must be one of the index\'s fields, not _id, and not in a unique index', async () => {
    const coll = store.collection<Tagged>(collectionName('array_index_refused'));
    for (const spec of [
      { name: 'elsewhere', fields: [['group', 'asc']], arrayField: 'tags' },
      { name: 'unique', fields: [['tags', 'asc']], arrayField: 'tags', unique: true },
      { name: 'id', fields: [['_id', 'asc']], arrayField: '_id' },
    ] satisfies Parameters<Collection<Tagged>['ensureIndexes']>[0]) {
      await coll.ensureIndexes([spec]).then(() => assert.unreachable(`${spec.name} accepted`), (err: unknown) => assert.instance(err, Error, spec.name));
    }
  });

  test('drop removes the documents and the indexes', async () => {
    const name = collectionName('drop');
    const coll = store.collection<Account>(name);
    await coll.ensureIndexes([{ name: 'by_email', fields: [['email', 'asc']], unique: true }]);
    await coll.insert({ _id: 'a', email: 'a@example.com' });
    await store.drop(name);
    assert.is(await coll.get('a'), null);
    assert.is(await coll.count(), 0);
    await coll.insert({ _id: 'a', email: 'a@example.com' });
    await coll.insert({ _id: 'b', email: 'a@example.com' });
    assert.is(await coll.count({ email: 'a@example.com' }), 2);
    await store.drop(collectionName('never_created'));
  });

  test('rename replaces the target with the source, its data and its indexes', async () => {
    const sourceName = collectionName('rebuilt');
    const targetName = collectionName('live');
    const source = store.collection<Account & { code?: string }>(sourceName);
    const target = store.collection<Account & { code?: string }>(targetName);
    await target.ensureIndexes([{ name: 'by_code', fields: [['code', 'asc']], unique: true }]);
    await target.insert({ _id: 'old', email: 'old@example.com', code: 'K' });
    await source.ensureIndexes([{ name: 'by_email', fields: [['email', 'asc']], unique: true }]);
    await source.insert({ _id: 'a', email: 'a@example.com', code: 'K' });
    await source.insert({ _id: 'b', email: 'b@example.com' });
    await source.replace({ _id: 'b', email: 'b2@example.com' }, 1);

    await store.rename(sourceName, targetName);

    assert.equal(await target.find({ orderBy: [['_id', 'asc']] }), [
      { _id: 'a', email: 'a@example.com', code: 'K', _v: 1 },
      { _id: 'b', email: 'b2@example.com', _v: 2 },
    ]);
    assert.is(await target.get('old'), null);
    await rejectsDuplicate(target.insert({ _id: 'c', email: 'a@example.com' }), targetName, 'by_email');
    await rejectsDuplicate(target.replace({ _id: 'b', email: 'a@example.com' }, 2), targetName, 'by_email');
    // The target's former index went with its former data.
    await target.insert({ _id: 'd', email: 'd@example.com', code: 'K' });
    assert.equal(sortedIds(await target.find({ where: { code: 'K' } })), ['a', 'd']);
    // The source name is free again and starts empty, without the moved index.
    assert.is(await source.count(), 0);
    await source.insert({ _id: 'a', email: 'a@example.com' });
    await source.insert({ _id: 'x', email: 'a@example.com' });
    assert.is(await source.count(), 2);
  });

  test('exists: made by a write or by ensureIndexes, kept when emptied, gone once dropped or renamed away; reads make none', async () => {
    const written = collectionName('exists_written');
    const indexed = collectionName('exists_indexed');
    const renamed = collectionName('exists_renamed');
    const never = collectionName('exists_never');
    await store.collection<Account>(never).find({});
    await store.collection<Account>(never).count();
    await store.collection<Account>(never).get('a');
    assert.is(await store.exists(never), false, 'reads make no collection');

    await store.collection<Account>(written).insert({ _id: 'a', email: 'a@example.com' });
    assert.is(await store.exists(written), true);
    await store.collection<Account>(written).delete('a');
    assert.is(await store.exists(written), true, 'an emptied collection still exists');
    await store.drop(written);
    assert.is(await store.exists(written), false);

    // A rebuild of no document: only its indexes make the collection.
    await store.collection<Account>(indexed).ensureIndexes([{ name: 'by_email', fields: [['email', 'asc']], unique: true }]);
    assert.is(await store.exists(indexed), true, 'an indexed collection of no document exists');
    assert.is(await store.collection(indexed).count(), 0);
    await store.rename(indexed, renamed);
    assert.is(await store.exists(indexed), false, 'renamed away');
    assert.is(await store.exists(renamed), true);
  });

  test('rename to a name not in use moves the collection', async () => {
    const sourceName = collectionName('from');
    const targetName = collectionName('to');
    const source = store.collection<Account>(sourceName);
    await source.ensureIndexes([{ name: 'by_email', fields: [['email', 'asc']], unique: true }]);
    await source.insert({ _id: 'a', email: 'a@example.com' });
    await store.rename(sourceName, targetName);
    const target = store.collection<Account>(targetName);
    assert.equal(await target.get('a'), { _id: 'a', email: 'a@example.com', _v: 1 });
    await rejectsDuplicate(target.insert({ _id: 'b', email: 'a@example.com' }), targetName, 'by_email');
    assert.is(await source.get('a'), null);
  });

  test.run();
}
