// RELAY_SEND_RATE across sender instances: two gates (two processes' worth) over one document
// store never let more than `rate` sends into one second between them.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { ensureSendRateIndexes, sharedSendRate } from '../apps/services/send-rate.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';
import { COLLECTIONS } from '../apps/services/collections.ts';

const test = suite('send rate shared by sender instances');

test('two instances at 25/s: 100 sends, never more than 25 in any second, every one let through', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'relay-rate-'));
  const stores = [new SqliteDocumentStore(join(dir, 'documents.db')), new SqliteDocumentStore(join(dir, 'documents.db'))];
  try {
    await ensureSendRateIndexes(stores[0]);
    const gates = stores.map((s) => sharedSendRate(s, 25));
    const passed: number[] = [];
    await Promise.all(gates.map(async (gate) => {
      for (let i = 0; i < 50; i++) {
        await gate.acquire();
        passed.push(Date.now());
      }
    }));
    assert.is(passed.length, 100);
    const perSecond = new Map<number, number>();
    for (const at of passed) perSecond.set(Math.floor(at / 1000), (perSecond.get(Math.floor(at / 1000)) ?? 0) + 1);
    assert.ok(Math.max(...perSecond.values()) <= 25, JSON.stringify([...perSecond]));
    assert.ok(perSecond.size >= 4, 'spread over at least four seconds');
  } finally {
    for (const s of stores) await s.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a slot acknowledged after its second has ended is left unused: the send takes a slot of the second it happens in', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'relay-rate-'));
  const store = new SqliteDocumentStore(join(dir, 'documents.db'));
  try {
    await ensureSendRateIndexes(store);
    let clock = 5_999_400;
    let slowInserts = 1;
    // The first insert is acknowledged 700 ms later, as a durable write behind a slow sync can be.
    const slowStore = new Proxy(store, {
      get(target, key) {
        if (key !== 'collection') return Reflect.get(target, key, target);
        return (name: string) => {
          const collection = target.collection(name);
          return new Proxy(collection, {
            get(c, k) {
              if (k !== 'insert') return Reflect.get(c, k, c);
              return async (doc: never) => {
                await c.insert(doc);
                if (slowInserts-- > 0) clock += 700;
              };
            },
          });
        };
      },
    });
    const gate = sharedSendRate(slowStore, 2, () => clock);
    await gate.acquire();
    const taken = (await store.collection<{ _id: string }>(COLLECTIONS.sendRateSlots).find({ limit: 10 })).map((s) => s._id).sort();
    assert.equal(taken, ['5999:0', '6000:0']);
    assert.is(Math.floor(clock / 1000), 6000, 'the send happens in the second of the slot it holds');
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test.run();
