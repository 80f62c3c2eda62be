// A charge costs the same however many workspaces send: the usage ledger keeps the months it
// folded within a memory budget, not a count of streams, and a month over and settled only as
// what a charge under an Idempotency-Key asks of it. With over a thousand workspaces sending
// with keys (two months each: the month and the month before), a second round of sends reads
// none of their months from the start again (it read every charge's months from revision 0: a
// month of 200,000 charges is over a second of blocked event loop). A month kept that way still
// answers exactly: an email id charged in it (its email not stored) adds nothing when retried in
// the month after.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { UsageLedger, type RecipientCharge } from '../apps/services/usage-ledger.ts';
import { DEFAULT_ALLOWANCES } from '../domain/usage/quota.ts';
import { SqliteEventStore } from '../infra/sqlite/event-store.ts';

const AT = new Date('2026-11-22T10:00:00.000Z');
const WORKSPACES = 1_050;

const charge = (workspaceId: string, emailId: string, at: Date): RecipientCharge => ({
  workspaceId, emailId, fingerprint: 'f', apiKeyId: 'key_1', developmentKey: false, recipients: 1,
  allowances: DEFAULT_ALLOWANCES, at, origin: { correlationId: 'test', causationId: 'test' }, idempotent: true,
});

async function withStore(run: (store: SqliteEventStore) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'relay-usage-many-'));
  const store = new SqliteEventStore(join(dir, 'events.db'));
  try {
    await run(store);
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

test('a second round of idempotent sends over 1,050 workspaces does not read their months from the start again', async () => {
  await withStore(async (store) => {
    let fullReads = 0;
    const readStream = store.readStream.bind(store);
    store.readStream = (streamId, options) => {
      if ((options?.fromRevision ?? 0) === 0) fullReads++;
      return readStream(streamId, options);
    };
    const ledger = new UsageLedger(store);
    try {
      for (let i = 0; i < WORKSPACES; i++) await ledger.charge(charge(`ws_many${i}`, `em_${randomUUID()}`, AT)); // each workspace's months are read once
      assert.is(fullReads, 2 * WORKSPACES);
      fullReads = 0;
      for (let i = 0; i < WORKSPACES; i++) await ledger.charge(charge(`ws_many${i}`, `em_${randomUUID()}`, AT)); // the same workspaces again, in the same order
      assert.is(fullReads, 0, `the second round read ${fullReads} usage streams from revision 0 for ${WORKSPACES} charges`);
    } finally {
      ledger.close();
    }
  });
});

test('a month kept as final still finds the email ids charged in it: a retry in the month after adds nothing', async () => {
  await withStore(async (store) => {
    const kept = new UsageLedger(store);
    const other = new UsageLedger(store);
    try {
      await kept.charge(charge('ws_final', 'em_october', new Date('2026-10-20T10:00:00Z'))); // October folded here
      await other.charge({ ...charge('ws_final', 'em_failed', new Date('2026-10-31T23:59:59.000Z')), recipients: 2 }); // its email was not stored
      await kept.charge(charge('ws_final', 'em_november', AT)); // October is final here from now on, em_failed in it
      await kept.charge({ ...charge('ws_final', 'em_failed', AT), recipients: 2 }); // the retry, in November
      await kept.charge({ ...charge('ws_final', 'em_october', AT), recipients: 1 }); // and another, of the first
      const november = async () => (await kept.usage('ws_final', AT)).workspaceRecipients;
      assert.is(await november(), 1, 'the retries added nothing to November');
      await kept.charge({ ...charge('ws_final', 'em_failed', AT), recipients: 3 }); // another body under its key, with one recipient more
      assert.is(await november(), 2, 'only the recipient beyond those charged in October');
      assert.is((await kept.usage('ws_final', new Date('2026-10-15T00:00:00Z'))).workspaceRecipients, 3);
    } finally {
      kept.close();
      other.close();
    }
  });
});

test.run();
