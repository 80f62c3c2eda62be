// examples/reference-fold.py, written from docs/event-status-rules.md alone, agrees with the
// `emails` read model (kept by the live projector) on every email of a generated history with
// bounces, complaints, delays after delivery, reports ahead of the sender's outcome (a delivery
// notice before "sent", a delay recorded before the outcome it followed), delivery notices after
// a delivery_unknown, and BCC recipients. Its input is what `relay events` prints.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { COLLECTIONS } from '../apps/services/collections.ts';
import type { EmailView } from '../projections/email-view.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { groupCaughtUp } from './support/consumer-groups.ts';
import { appendHistory, generateHistory } from './support/history.ts';
import { runRelay } from './support/relay-process.ts';

const test = suite('reference fold (examples/reference-fold.py)');
const dataDir = mkdtempSync(join(tmpdir(), 'relay-reference-fold-'));
let t: TestApp;
let appended = 0;

function python(script: string, input: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('python3', [script], { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(input);
  });
}

test.before(async () => {
  t = await startTestApp({}, { processors: ['projector'], dataDir });
  appended = await appendHistory(t.stores.events, generateHistory({ emails: 1500, projectId: 'prj_fold', seed: 2611 }));
  await groupCaughtUp(t, 'projector', appended);
});

test.after(async () => {
  await t.close();
  rmSync(dataDir, { recursive: true, force: true });
});

test('the reference fold gives every email the status, recipients, sentAt, deliveredAt and failureCode of the read model', async () => {
  const exported = await runRelay(['events', '--prefix', 'email-'], { RELAY_DATA_DIR: dataDir });
  assert.is(exported.code, 0, exported.stderr);
  assert.is(exported.stdout.trim().split('\n').length, appended);
  const folded = await python('examples/reference-fold.py', exported.stdout);
  assert.is(folded.code, 0, folded.stderr);
  const byId = new Map(folded.stdout.trim().split('\n').map((line) => {
    const view = JSON.parse(line) as { id: string };
    return [view.id, view];
  }));
  const views = await t.stores.documents.collection<EmailView>(COLLECTIONS.emails).find({ orderBy: [['_id', 'asc']], limit: 100_000 });
  assert.is(views.length, 1500);
  assert.is(byId.size, views.length);
  const statuses = new Set<string>();
  for (const view of views) {
    statuses.add(view.status);
    assert.equal(byId.get(view._id), {
      id: view._id, status: view.status, recipients: view.recipients, sentAt: view.sentAt, deliveredAt: view.deliveredAt, failureCode: view.failureCode,
    }, `email ${view._id}`);
  }
  for (const status of ['suppressed', 'sent', 'delivered', 'hard_bounced', 'soft_bounced', 'rejected', 'failed', 'complained']) {
    assert.ok(statuses.has(status), `the history has emails ending ${status}`);
  }
  // Delays reported after a delivery, which must not move the recipient back.
  type Exported = { streamId: string; type: string; data: { outcome?: string; recipientIndex?: number; recipients?: Array<{ index: number; status?: string; reportedFirst?: true }> } };
  const events = exported.stdout.trim().split('\n').map((line) => JSON.parse(line) as Exported);
  const delayedAfterDelivery = views.filter((view) => view.recipients.some((r, index) => r.status === 'delivered'
    && events.some((e) => e.streamId === `email-${view._id}` && e.type === 'RecipientReported' && e.data.outcome === 'delayed' && e.data.recipientIndex === index)));
  assert.ok(delayedAfterDelivery.length > 0, 'some delivered recipients were reported delayed afterwards');
  // Reports over the sender's failed, and delays kept over the sent they followed.
  const of = (view: EmailView, type: string) => events.filter((e) => e.streamId === `email-${view._id}` && e.type === type);
  const deliveredAfterUnknown = views.filter((view) => view.recipients[0]?.status === 'delivered' && of(view, 'DeliveryFailed').length > 0);
  assert.ok(deliveredAfterUnknown.length > 0, 'some recipients failed with delivery_unknown were delivered by a later report');
  const keptDelayed = views.filter((view) => view.recipients[0]?.status === 'delayed'
    && of(view, 'DeliveryAttempted').some((e) => e.data.recipients?.some((r) => r.index === 0 && r.reportedFirst && r.status === 'sent')));
  assert.ok(keptDelayed.length > 0, 'some recipients reported delayed before the sent it followed still show delayed');
});

test.run();
