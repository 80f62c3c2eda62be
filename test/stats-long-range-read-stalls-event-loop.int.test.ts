// GET /v1/projects/:id/stats over a long range must not hold the API process's event loop for the
// whole read. The embedded document store reads synchronously (node:sqlite), and an await on a
// settled promise is a microtask, never a turn of the event loop: paging through every email of
// the range (apps/services/deliverability-stats.ts emailsActiveIn) back to back froze the process
// (every tenant's sends, /healthz, the dashboard) 7 s for a project of 200,000 emails over 200 days
// (the API allows 400), again with every reload of the stats page. The read gives the event loop a
// turn between its pages; the bound below (1 s) is far above a page's cost, even on a loaded machine.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { deferDurability } from '../infra/ports/durability.ts';
import type { DeliverabilityEmail } from '../projections/deliverability.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { longestStall } from './support/event-loop.ts';
import { call, newCaller, workspaceWithProject } from './support/management.ts';

const N = 200_000;
const STALL_BOUND_MS = 1_000;
const START = Date.parse('2026-06-01T00:00:00.000Z');
const SPREAD_MS = 150 * 24 * 3_600_000;

test(`GET /v1/projects/:id/stats over 200 days of ${N.toLocaleString('en')} emails never holds the event loop for ${STALL_BOUND_MS} ms`, async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-stats-stall-'));
  let t: TestApp | undefined;
  try {
    t = await startTestApp({}, { dataDir });
    const owner = await newCaller(t, 'stats-stall@example.test');
    const { projectId } = await workspaceWithProject(t, owner, 'production');
    // The deliverability read model as its processor writes it: one document per email, sent and
    // delivered a few seconds after admission.
    const emails = t.stores.documents.collection<DeliverabilityEmail>(COLLECTIONS.deliverability);
    for (let from = 0; from < N; from += 5_000) {
      await deferDurability(() => Promise.all(Array.from({ length: Math.min(5_000, N - from) }, (_, j) => {
        const i = from + j;
        const at = START + Math.floor((i / N) * SPREAD_MS);
        const iso = (ms: number) => new Date(ms).toISOString();
        return emails.insert({
          _id: `em_${String(i).padStart(8, '0')}`, projectId, sendingDomain: 'example.com', admittedAt: iso(at),
          firstAt: iso(at + 1_000), lastAt: iso(at + 3_000), span: 0, streamRevision: 4,
          recipients: [{ domain: i % 7 === 0 ? 'gmail.test' : 'example.org', status: 'delivered', reached: { sent: iso(at + 1_000), delivered: iso(at + 3_000) } }],
        } as DeliverabilityEmail);
      })));
    }
    const app = t;
    const { result: response, stallMs } = await longestStall(() =>
      call(app, 'GET', `/v1/projects/${projectId}/stats?from=2026-06-01T00:00:00Z&to=2026-12-18T00:00:00Z&granularity=day`, { as: owner }));
    // The positive marker first: the read summed every email.
    assert.is(response.statusCode, 200, response.body);
    assert.is(response.json().totals.delivered, N, 'every email of the range is counted');
    assert.ok(stallMs < STALL_BOUND_MS, `the stats read held the event loop for ${Math.round(stallMs)} ms in one go`);
  } finally {
    await t?.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test.run();
