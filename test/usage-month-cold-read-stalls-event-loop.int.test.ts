// The first read of a workspace's month of usage after a start (its usage page, or its first send,
// whose charge folds the month first) must not hold the API process's event loop for as long as
// the month is big: folded in one read of the stream (one synchronous SELECT on the embedded
// store, every charge held at once), a month of 500,000 charges stalled the process 2.6 s and took
// 1.09 GB (1,000,000: 5.9 s, 1.86 GB). The spec's monthly allowances make the month's size the
// customer's plan, not an anomaly. The ledger folds the month in pages with a turn of the event loop
// between them (apps/services/usage-ledger.ts foldInPages); the bound below (1 s) is far above a
// page's cost.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { monthOf, monthStart, usageStreamId } from '../domain/usage/quota.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant } from './support/delivery.ts';
import { longestStall } from './support/event-loop.ts';
import { call, workspaceOwner } from './support/management.ts';

const CHARGES = 500_000;
const STALL_BOUND_MS = 1_000;

test(`the first GET /v1/workspaces/:id/usage of a month of ${CHARGES.toLocaleString('en')} charges never holds the event loop for ${STALL_BOUND_MS} ms`, async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-usage-stall-'));
  let t: TestApp | undefined;
  try {
    t = await startTestApp({}, { dataDir });
    const tenant = await deliveryTenant(t);
    const owner = await workspaceOwner(t, tenant.workspaceId, 'usage-stall@example.test');
    const month = monthOf(t.ctx.now());
    const stream = usageStreamId(tenant.workspaceId, month);
    // The month's charges as admissions appended them (100 a batch in service; 10,000 here).
    const at = monthStart(month).toISOString();
    for (let from = 0; from < CHARGES; from += 10_000) {
      await t.stores.events.append(stream, Array.from({ length: 10_000 }, (_, j) => ({
        id: randomUUID(), type: 'RecipientsCharged',
        data: { emailId: `em_stall${from + j}`, fingerprint: 'f', apiKeyId: 'key_1', developmentKey: false, recipients: 1, occurredAt: at },
        metadata: { correlationId: 'test', causationId: 'test', schemaVersion: 1 },
      })), { expectedRevision: from === 0 ? 'no_stream' : from - 1 });
    }
    const app = t;
    const { result: answer, stallMs } = await longestStall(() => call(app, 'GET', `/v1/workspaces/${tenant.workspaceId}/usage`, { as: owner }));
    // The positive marker first: the month was read whole.
    assert.is(answer.statusCode, 200, answer.body);
    assert.is(answer.json().recipients.used, CHARGES);
    assert.ok(stallMs < STALL_BOUND_MS, `reading the month's usage held the event loop for ${Math.round(stallMs)} ms in one go`);
  } finally {
    await t?.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test.run();
