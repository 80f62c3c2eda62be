// The retention pass removes each kind of operational data with a deleteWhere
// (apps/services/operational-retention.ts); on the embedded store one statement over every match
// would run in one synchronous call. With 200,000 webhook deliveries past their 30 days (the steady
// state of a pass on an instance posting ~100 email events a second to one endpoint, and far less
// than the first pass after a stop of a day or two removes) that froze the thread's event loop and
// held the file's write lock for 1.4-1.6 s: in `relay start` the pipeline thread (processors,
// sender, dispatchers) stood still and every other connection's write waited. The embedded
// deleteWhere deletes in batches with a turn of the event loop between them
// (infra/sqlite/document-store.ts), as content keys are shredded 500 at a time; the bound asserted
// below (500 ms) is tens of times what a batch takes, even on a loaded machine.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { openStores } from '../apps/runtime.ts';
import { startRetention } from '../apps/pipeline/retention.ts';
import type { PruneReport } from '../apps/services/operational-retention.ts';
import { prepareStores } from '../apps/services/prepare-stores.ts';
import { deliveriesOf, fanOut, recordAttempt, takeAttempt } from '../apps/services/webhooks/deliveries.ts';
import { DELIVERY_POLICY } from '../domain/email/delivery.ts';
import { OPERATIONAL_RETENTION } from '../domain/retention.ts';
import { WEBHOOK_POLICY } from '../domain/webhooks/delivery.ts';
import type { WebhookEvent } from '../domain/webhooks/events.ts';
import { loadConfig } from '../infra/config.ts';
import { deferDurability } from '../infra/ports/durability.ts';
import { longestStall } from './support/event-loop.ts';

const T0 = new Date('2026-11-01T10:00:00.000Z');
const N = 200_000;
const STALL_BOUND_MS = 500;

test(`a retention pass over ${N.toLocaleString('en')} finished webhook deliveries past their period never holds the event loop for ${STALL_BOUND_MS} ms`, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'relay-retention-stall-'));
  const stores = await openStores(loadConfig({ RELAY_DATA_DIR: dir, RELAY_LOG_LEVEL: 'silent' }));
  try {
    await prepareStores(stores.documents);
    const { documents } = stores;
    // One delivery made as in service: fanned out, attempted, answered 200.
    const event = {
      id: 'evt_model', type: 'email.sent', created_at: T0.toISOString(),
      data: { email_id: 'em_model', project_id: 'prj_hooks', test_mode: false, status: 'sent', recipients: ['ann@example.test'], provider_message_id: null },
    } as WebhookEvent;
    const endpoint = {
      _id: 'whe_1', workspaceId: 'ws_hooks', projectId: 'prj_hooks', url: 'https://hooks.example.com/', events: ['email.sent'], description: null,
      enabled: true, secretSealed: 'x', createdAt: T0.toISOString(), updatedAt: T0.toISOString(),
    } as Parameters<typeof fanOut>[2][number];
    assert.is(await fanOut(documents, [event], [endpoint], T0), 1);
    const [fresh] = await deliveriesOf(documents).find({ limit: 1 });
    const taken = (await takeAttempt(documents, fresh, T0, WEBHOOK_POLICY))!;
    assert.ok(await recordAttempt(documents, taken, { httpStatus: 200, errorCode: null, durationMs: 5, createdAt: T0.toISOString() }, T0, WEBHOOK_POLICY));
    const [model] = await deliveriesOf(documents).find({ limit: 1 });
    assert.is(model.status, 'succeeded');
    const { _v, ...shape } = model;
    void _v;
    // Many more like it, one per email, each finished at T0 (inserted in group-committed batches).
    for (let from = 1; from < N; from += 5_000) {
      await deferDurability(() => Promise.all(Array.from({ length: Math.min(5_000, N - from) }, (_, j) => {
        const i = from + j;
        return deliveriesOf(documents).insert({ ...shape, _id: `whd_${String(i).padStart(8, '0')}`, emailId: `em_${i}`, eventId: `evt_${i}` });
      })));
    }
    assert.is(await deliveriesOf(documents).count(), N);

    // The retention part's pass, a day after the period ended for all of them.
    const now = new Date(T0.getTime() + OPERATIONAL_RETENTION.finishedWebhookDeliveryMs + 24 * 3_600_000);
    let report: PruneReport | undefined;
    const { stallMs } = await longestStall(async () => {
      const retention = await startRetention({
        documents, events: stores.events, deliveryPolicy: DELIVERY_POLICY, now: () => now, everyMs: 3_600_000,
        onPruned: (r) => (report = r), onError: (error) => { throw error; },
      });
      await retention.stop();
    });
    // The positive marker first: the pass did its work.
    assert.ok(report, 'the pass completed');
    assert.is(report!.webhookDeliveries, N, 'every delivery past its period is removed');
    assert.is(await deliveriesOf(documents).count(), 0);
    assert.ok(stallMs < STALL_BOUND_MS, `the pass held the event loop (and the write lock) for ${Math.round(stallMs)} ms in one go`);
  } finally {
    await stores.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test.run();
