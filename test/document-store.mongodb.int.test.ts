// The document store contract on the MongoDB adapter, against the server in
// RELAY_MONGODB_URL (FerretDB from infra/engines, or MongoDB), in a database of its own
// that is dropped at the end. Without the variable the tests that need a server are
// registered as skipped, with the reason printed; only the URL parsing runs.
import { randomBytes } from 'node:crypto';
import { MongoClient } from 'mongodb';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { EMAILS_PROJECTION } from '../apps/services/projection-registry.ts';
import { MongoDocumentStore, databaseName } from '../infra/mongodb/document-store.ts';
import type { Stored } from '../infra/ports/document-store.ts';
import { documentStoreContract } from './contracts/document-store.contract.ts';

const baseUrl = process.env.RELAY_MONGODB_URL?.trim();

/** The error a promise rejects with; fails the test when it resolves. */
async function rejection(work: Promise<unknown>, what: string): Promise<Error> {
  try {
    await work;
  } catch (err) {
    assert.instance(err, Error);
    return err as Error;
  }
  assert.unreachable(`expected a rejection: ${what}`);
  throw new Error('unreachable');
}

/** The URL with its database path replaced, keeping host list and options. */
function withDatabase(url: string, database: string): string {
  const match = /^(mongodb(?:\+srv)?:\/\/[^/?#]*)(?:\/[^?#]*)?(.*)$/i.exec(url);
  if (!match) throw new Error(`RELAY_MONGODB_URL is not a mongodb URL: ${url}`);
  return `${match[1]}/${database}${match[2]}`;
}

const database = `relay_test_${randomBytes(6).toString('hex')}`;
const url = baseUrl ? withDatabase(baseUrl, database) : undefined;
// Probed before any suite is registered: uvu starts running on the first run() call, and a
// suite registered after an await would miss the queue.
const flavor = url ? await MongoDocumentStore.connect(url).then(async (probe) => {
  const found = probe.flavor;
  await probe.close();
  return found;
}) : undefined;

const names = suite('mongodb document store: database from the URL');

names('the database is the URL path, relay when there is none', () => {
  assert.is(databaseName('mongodb://127.0.0.1:27018/relay'), 'relay');
  assert.is(databaseName('mongodb://u:p@h1:1,h2:2/mail?replicaSet=rs0'), 'mail');
  assert.is(databaseName('mongodb+srv://cluster.example.com/prod_db?retryWrites=true'), 'prod_db');
  assert.is(databaseName('mongodb://127.0.0.1:27018'), 'relay');
  assert.is(databaseName('mongodb://127.0.0.1:27018/?directConnection=true'), 'relay');
  assert.is(withDatabase('mongodb://h1:1,h2:2/relay?x=1', 'other'), 'mongodb://h1:1,h2:2/other?x=1');
});

names.run();

if (!baseUrl || !url) {
  const skipped = suite('mongodb document store');
  const reason = 'RELAY_MONGODB_URL is not set (eval "$(bash infra/engines/engines.sh up)" starts FerretDB)';
  console.log(`skip: mongodb document store tests: ${reason}`);
  skipped.skip('document store contract (mongodb)', () => {});
  skipped.skip('email list indexes can be created', () => {});
  skipped.skip('compare-and-set holds across clients', () => {});
  skipped.run();
} else {
  let opened = 0;

  documentStoreContract('mongodb', async () => {
    const store = await MongoDocumentStore.connect(url);
    opened++;
    return { store, close: () => store.close() };
  });

  const extra = suite('mongodb document store: beyond the contract');
  let store: MongoDocumentStore;
  let admin: MongoClient;

  extra.before(async () => {
    store = await MongoDocumentStore.connect(url);
    admin = await MongoClient.connect(baseUrl);
  });

  extra.after(async () => {
    await store?.close();
    if (admin) {
      await admin.db(database).dropDatabase();
      await admin.close();
    }
  });

  extra('the store writes into the database named by the URL', async () => {
    await store.collection<{ _id: string; n: number }>('where_am_i').insert({ _id: 'x', n: 1 });
    assert.equal(await admin.db(database).collection('where_am_i').findOne({ _id: 'x' as never }), { _id: 'x', n: 1, _v: 1 });
    assert.ok(opened >= 1, 'the contract ran against this database');
  });

  extra('the email list indexes can be created, twice, and are the ones declared (on FerretDB, none: it reads through none)', async () => {
    const collection = `emails_${randomBytes(4).toString('hex')}`;
    await EMAILS_PROJECTION.ensureIndexes(store, collection);
    await EMAILS_PROJECTION.ensureIndexes(store, collection);
    const indexes = await admin.db(database).collection(collection).listIndexes().toArray();
    if (flavor === 'ferretdb') {
      // Only unique indexes are made there (infra/mongodb/document-store.ts, ensureIndexes); the collection is.
      assert.equal(indexes.map((index) => index.name), ['_id_']);
    } else {
      const byName = new Map(indexes.map((index) => [index.name as string, index.key as Record<string, number>]));
      assert.equal(Object.entries(byName.get('project_created') ?? {}), [['projectId', 1], ['createdAt', -1], ['_id', -1]]);
      assert.equal(Object.entries(byName.get('key_created') ?? {}), [['projectId', 1], ['apiKeyId', 1], ['createdAt', -1], ['_id', -1]]);
      // Each filter's index ends in the list's order; toAddresses is multikey (each address apart).
      for (const [name, field] of [['project_recipient', 'toAddresses'], ['project_sender', 'fromAddress'], ['project_domain', 'fromDomain'], ['project_status', 'status']]) {
        assert.equal(Object.entries(byName.get(name) ?? {}), [['projectId', 1], [field, 1], ['createdAt', -1], ['_id', -1]], name);
      }
      assert.is(indexes.length, 7, 'the six declared plus _id');
    }
    // The list query's shape (scope, recipient contains, date range, desc keyset) runs over them.
    const emails = store.collection<{ _id: string; projectId: string; toAddresses: string[]; createdAt: string }>(collection);
    for (let i = 0; i < 6; i++) {
      await emails.insert({ _id: `e${i}`, projectId: i < 5 ? 'p1' : 'p2', toAddresses: i % 2 === 0 ? ['a@x.test'] : ['b@x.test'], createdAt: `2025-01-0${i + 1}T00:00:00.000Z` });
    }
    const page = await emails.find({
      where: { projectId: 'p1', toAddresses: { contains: 'a@x.test' }, createdAt: { gte: '2025-01-01T00:00:00.000Z', lt: '2025-01-06T00:00:00.000Z' } },
      orderBy: [['createdAt', 'desc'], ['_id', 'desc']],
      after: { createdAt: '2025-01-05T00:00:00.000Z', _id: 'e4' },
      limit: 10,
    });
    assert.equal(page.map((e) => e._id), ['e2', 'e0']);
  });

  extra('an index redefined under its name replaces the old definition', async () => {
    const name = `redefine_${randomBytes(4).toString('hex')}`;
    const coll = store.collection<{ _id: string; code: string }>(name);
    await coll.ensureIndexes([{ name: 'by_code', fields: [['code', 'asc']] }]);
    await coll.insert({ _id: 'a', code: 'K' });
    await coll.insert({ _id: 'b', code: 'K' });
    await coll.delete('b');
    await coll.ensureIndexes([{ name: 'by_code', fields: [['code', 'asc']], unique: true }]);
    const err = await rejection(coll.insert({ _id: 'c', code: 'K' }), 'the redefined index is unique');
    assert.is((err as { index?: string }).index, 'by_code');
    await coll.ensureIndexes([{ name: 'by_code', fields: [['code', 'desc']] }]);
    await coll.insert({ _id: 'c', code: 'K' });
    const key = (await admin.db(database).collection(name).listIndexes().toArray()).find((i) => i.name === 'by_code')?.key;
    // FerretDB keeps no non-unique index: the unique one went, and none came in its place.
    assert.equal(key, flavor === 'ferretdb' ? undefined : { code: -1 });
  });

  extra('on FerretDB a non-unique index made earlier goes, so that it cannot refuse documents; unique ones stay', async () => {
    if (flavor !== 'ferretdb') return;
    const name = `leftover_${randomBytes(4).toString('hex')}`;
    await admin.db(database).collection(name).createIndexes([{ key: { tags: 1 }, name: 'by_tags' }, { key: { code: 1 }, name: 'by_code', unique: true }]);
    const coll = store.collection<{ _id: string; tags: string[]; code?: string }>(name);
    await coll.ensureIndexes([{ name: 'by_tags', fields: [['tags', 'asc']], arrayField: 'tags' }, { name: 'by_code', fields: [['code', 'asc']], unique: true }]);
    const names = (await admin.db(database).collection(name).listIndexes().toArray()).map((index) => index.name as string);
    assert.equal(names.sort(), ['_id_', 'by_code']);
    // What the whole-array index refused: more than PostgreSQL's 2,704 bytes in one btree entry.
    const tags = Array.from({ length: 50 }, (_, i) => `${'t'.repeat(60)}${i}`);
    await coll.insert({ _id: 'long', tags });
    assert.equal(await coll.find({ where: { tags: { contains: tags[49] } } }), [{ _id: 'long', tags, _v: 1 }]);
  });

  extra('values that would be query operators are refused', async () => {
    const coll = store.collection<{ _id: string; s: string }>(`inject_${randomBytes(4).toString('hex')}`);
    await coll.insert({ _id: 'a', s: 'x' });
    for (const where of [{ s: { $ne: 'nope' } }, { s: { eq: { $gt: '' } } }, { $where: 'true' }, { s: { in: [{ $gt: '' }] } }, { 'a.$b': 1 }]) {
      await rejection(coll.find({ where: where as never }), JSON.stringify(where));
      await rejection(coll.count(where as never), JSON.stringify(where));
    }
  });

  extra('a closed store answers ping false and refuses work', async () => {
    const other = await MongoDocumentStore.connect(url);
    assert.is(await other.ping(), true);
    await other.close();
    assert.is(await other.ping(), false);
    assert.match((await rejection(other.collection('anything').get('x'), 'a read on a closed store')).message, /document store is closed/);
  });

  const crossClient = 'compare-and-set holds across clients';
  if (flavor === 'ferretdb') {
    // FerretDB v1 re-reads and writes back by _id without re-checking the version, so two
    // clients can both win; the adapter only makes CAS hold within one client there.
    console.log(`skip: ${crossClient}: FerretDB v1 has no atomic conditional update across connections (see infra/mongodb/document-store.ts)`);
    extra.skip(crossClient, () => {});
  } else {
    extra(crossClient, async () => {
      const second = await MongoDocumentStore.connect(url);
      try {
        const name = `cross_${randomBytes(4).toString('hex')}`;
        const a = store.collection<{ _id: string; value: number }>(name);
        const b = second.collection<{ _id: string; value: number }>(name);
        for (let round = 0; round < 10; round++) {
          await a.insert({ _id: `n${round}`, value: 0 });
          const results = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? a : b).replace({ _id: `n${round}`, value: i + 1 }, 1)));
          const winners = results.filter((r): r is Stored<{ _id: string; value: number }> => r !== null);
          assert.is(winners.length, 1, `round ${round}`);
          assert.equal(await b.get(`n${round}`), winners[0]);
        }
      } finally {
        await second.close();
      }
    });
  }

  extra.run();
}
