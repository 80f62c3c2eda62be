// RELAY_SEND_RATE across sender instances: two gates (two processes' worth) over one document
// store never let more than `rate` sends into one second between them.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { ensureSendRateIndexes, sharedSendRate } from '../apps/services/send-rate.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';

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

test.run();
